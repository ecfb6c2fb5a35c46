package sink

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Recovery: what OpenSpool does with the segments a previous run left.

// recoverDir removes leftover temporary files, checks and repairs every
// segment in sequence order, seals the .open ones, and sets the next
// sequence number past every segment seen, including those in
// Dir/corrupt, so that no name is reused.
func (s *Spool) recoverDir() error {
	dir := s.cfg.Dir
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	if cents, err := os.ReadDir(filepath.Join(dir, corruptDir)); err == nil {
		for _, e := range cents {
			if strings.HasSuffix(e.Name(), tmpExt) {
				os.Remove(filepath.Join(dir, corruptDir, e.Name()))
			} else if seq, ok := parseSeq(e.Name()); ok {
				s.nextSeq = max(s.nextSeq, seq+1)
			}
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	type found struct {
		seq  uint64
		name string
		ext  string
	}
	var files []found
	for _, e := range entries {
		name := e.Name()
		if strings.HasSuffix(name, tmpExt) {
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				return err
			}
			continue
		}
		seq, ext, ok := parseSegmentName(name)
		if !ok || !e.Type().IsRegular() {
			continue
		}
		files = append(files, found{seq: seq, name: name, ext: ext})
		s.nextSeq = max(s.nextSeq, seq+1)
	}
	sort.Slice(files, func(i, j int) bool {
		if files[i].seq != files[j].seq {
			return files[i].seq < files[j].seq
		}
		return files[i].ext > files[j].ext // .seg before .open before .map
	})
	for i, fl := range files {
		if i > 0 && files[i-1].seq == fl.seq {
			// Sealing renames, so a sequence number never has both files;
			// if one appears anyway, keep it on disk for a person to read.
			s.log.Error("sink: spool segment has both a .seg and an .open file; leaving the .open one unshipped",
				"segment", fl.name)
			continue
		}
		path := filepath.Join(dir, fl.name)
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if fl.ext == mappedExt {
			data, err = s.trimMapped(path, data)
		} else {
			data, err = s.repair(path, data, scanSegment(data))
		}
		if err != nil {
			return err
		}
		if len(data) == 0 {
			if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			continue
		}
		if fl.ext != segmentExt {
			sealed := filepath.Join(dir, segmentName(fl.seq, segmentExt))
			if err := os.Rename(path, sealed); err != nil {
				return err
			}
			path = sealed
		}
		seg := &segment{seq: fl.seq, path: path, size: int64(len(data))}
		for _, r := range scanSegment(data).good {
			seg.events += int64(countEvents(r.payload(data)))
			if seg.first.IsZero() {
				seg.first = firstEventTime(r.payload(data))
			}
		}
		s.sealed = append(s.sealed, seg)
		s.bytes += seg.size
		s.pending += seg.events
	}
	return syncDir(dir)
}

// repair brings the file at path, holding data, to the state scan calls
// for, and returns what the file holds then. A segment with bad records is
// first copied as it is to Dir/corrupt (under a name not taken yet), then
// rewritten with its good records only (removed if none is left): both by
// write, fsync and rename, so that a crash in between leaves the damaged
// file in place to be repaired again. A torn tail is truncated in place.
func (s *Spool) repair(path string, data []byte, sc segmentScan) ([]byte, error) {
	name := filepath.Base(path)
	switch {
	case sc.bad > 0:
		cdir := filepath.Join(s.cfg.Dir, corruptDir)
		if err := os.MkdirAll(cdir, spoolDirMode); err != nil {
			return nil, err
		}
		cname, err := freeName(cdir, name)
		if err != nil {
			return nil, err
		}
		if err := writeFileSync(filepath.Join(cdir, cname), data); err != nil {
			return nil, err
		}
		var kept []byte
		for _, r := range sc.good {
			kept = append(kept, data[r.off:r.end]...)
		}
		if len(kept) == 0 {
			if err := os.Remove(path); err != nil {
				return nil, err
			}
			if err := syncDir(s.cfg.Dir); err != nil {
				return nil, err
			}
		} else if err := writeFileSync(path, kept); err != nil {
			return nil, err
		}
		s.mu.Lock()
		s.corrupt++
		s.mu.Unlock()
		s.log.Error("sink: spool segment has damaged records; copied aside, shipping its good records",
			"segment", name, "copied_to", filepath.Join(corruptDir, cname),
			"bad_records", sc.bad, "good_records", len(sc.good), "bytes_not_shipped", len(data)-len(kept))
		return kept, nil
	case sc.torn:
		if err := truncateSync(path, int64(sc.end)); err != nil {
			return nil, err
		}
		s.mu.Lock()
		s.torn++
		s.mu.Unlock()
		s.log.Warn("sink: spool segment ends in a torn record, left by a crash mid-write; truncated",
			"segment", name, "bytes_removed", len(data)-sc.end)
		return data[:sc.end], nil
	}
	return data, nil
}

// trimMapped cuts the .map segment at path, holding data, to its records
// (see scanMapped), and returns what the file holds then. Past them lies
// what was preallocated and never written, which goes without a word, and
// at most one batch a crash cut short, which is counted and logged as a
// torn record.
func (s *Spool) trimMapped(path string, data []byte) ([]byte, error) {
	sc := scanMapped(data)
	if sc.end == len(data) {
		return data, nil
	}
	if err := truncateSync(path, int64(sc.end)); err != nil {
		return nil, err
	}
	if sc.torn {
		s.mu.Lock()
		s.torn++
		s.mu.Unlock()
		s.log.Warn("sink: spool segment ends in a torn record, left by a crash mid-write; truncated",
			"segment", filepath.Base(path), "bytes_removed", len(data)-sc.end)
	}
	return data[:sc.end], nil
}

// truncateSync truncates the file at path to size and syncs it.
func truncateSync(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
