#!/usr/bin/env python3
"""Rebuilds sample.jsonl, the labelled sample of the instruction heuristic.

Usage: gen.py BIPIA_GIT_DIR  (a clone of github.com/microsoft/BIPIA at the
commit below). Reads the BIPIA files with `git show COMMIT:path`, so the
sample is the same whatever the clone's checkout.
"""
import json
import subprocess
import sys

COMMIT = "1a2a91da6bb12838e05d1b2e54d98e2f37b835f3"
REPO = "microsoft/BIPIA"


def show(gitdir, path):
    return subprocess.check_output(["git", "-C", gitdir, "show", f"{COMMIT}:{path}"], text=True)


def main(gitdir):
    emails = [json.loads(l)["context"] for l in show(gitdir, "benchmark/email/test.jsonl").splitlines() if l.strip()]
    code = [json.loads(l) for l in show(gitdir, "benchmark/code/test.jsonl").splitlines() if l.strip()]
    attacks = []
    for f in ("benchmark/text_attack_test.json", "benchmark/code_attack_test.json"):
        for cat, items in json.loads(show(gitdir, f)).items():
            for i, a in enumerate(items[:2]):
                attacks.append((f"{f.split('/')[-1]}#{cat}[{i}]", a))
    out = []
    # Injections: each attack inserted at the middle line of an email
    # (BIPIA's own construction puts attacks at the start, middle or end).
    for n, (src, a) in enumerate(attacks):
        lines = emails[n % len(emails)].split("\n")
        mid = len(lines) // 2
        text = "\n".join(lines[:mid] + [a] + lines[mid:])
        out.append({"id": f"bipia-attack-{n:03d}", "label": "injection",
                    "source": f"{REPO}@{COMMIT[:12]} {src} in benchmark/email/test.jsonl[{n % len(emails)}]", "text": text})
    # Benign: the same emails without the attack, and code-QA contexts.
    for n, e in enumerate(emails):
        out.append({"id": f"bipia-email-{n:03d}", "label": "benign",
                    "source": f"{REPO}@{COMMIT[:12]} benchmark/email/test.jsonl[{n}]", "text": e})
    for n, c in enumerate(code[:15]):
        out.append({"id": f"bipia-code-{n:03d}", "label": "benign",
                    "source": f"{REPO}@{COMMIT[:12]} benchmark/code/test.jsonl[{n}].context", "text": "\n".join(c["context"])})
    for n, l in enumerate(open("handwritten.jsonl")):
        d = json.loads(l)
        out.append({"id": f"hand-{d['label']}-{n:03d}", "label": d["label"], "source": "hand-written", "text": d["text"]})
    write("sample.jsonl", out)

    # Held out: built once the weights were set, and never tuned on. The
    # third and fourth attack of each category, at the start and at the
    # end of BIPIA's training e-mails; those e-mails clean; more code-QA
    # contexts.
    train = [json.loads(l)["context"] for l in show(gitdir, "benchmark/email/train.jsonl").splitlines() if l.strip()]
    held = []
    n = 0
    for f in ("benchmark/text_attack_test.json", "benchmark/code_attack_test.json"):
        for cat, items in json.loads(show(gitdir, f)).items():
            for i, a in enumerate(items[2:4], start=2):
                e = train[n % len(train)]
                text = a + "\n" + e if i == 2 else e + "\n" + a
                held.append({"id": f"bipia-heldout-attack-{n:03d}", "label": "injection",
                             "source": f"{REPO}@{COMMIT[:12]} {f.split('/')[-1]}#{cat}[{i}] in benchmark/email/train.jsonl[{n % len(train)}]",
                             "text": text})
                n += 1
    for n, e in enumerate(train):
        held.append({"id": f"bipia-heldout-email-{n:03d}", "label": "benign",
                     "source": f"{REPO}@{COMMIT[:12]} benchmark/email/train.jsonl[{n}]", "text": e})
    for n, c in enumerate(code[15:35], start=15):
        held.append({"id": f"bipia-heldout-code-{n:03d}", "label": "benign",
                     "source": f"{REPO}@{COMMIT[:12]} benchmark/code/test.jsonl[{n}].context", "text": "\n".join(c["context"])})
    write("heldout.jsonl", held)

    # Blind: built when the held-out set had been looked at and the cues
    # generalised from it, and scored once, at the end. The first two
    # attacks of each category of BIPIA's *training* attack files (other
    # texts than the test files'), at the start, middle or end of a test
    # e-mail; BIPIA's training code-QA contexts clean.
    blind = []
    n = 0
    for f in ("benchmark/text_attack_train.json", "benchmark/code_attack_train.json"):
        for cat, items in json.loads(show(gitdir, f)).items():
            for i, a in enumerate(items[:2]):
                lines = emails[(n * 7) % len(emails)].split("\n")
                at = (0, len(lines) // 2, len(lines))[n % 3]
                text = "\n".join(lines[:at] + [a] + lines[at:])
                blind.append({"id": f"bipia-blind-attack-{n:03d}", "label": "injection",
                              "source": f"{REPO}@{COMMIT[:12]} {f.split('/')[-1]}#{cat}[{i}] in benchmark/email/test.jsonl[{(n * 7) % len(emails)}]",
                              "text": text})
                n += 1
    for n, l in enumerate(show(gitdir, "benchmark/code/train.jsonl").splitlines()):
        if l.strip():
            blind.append({"id": f"bipia-blind-code-{n:03d}", "label": "benign",
                          "source": f"{REPO}@{COMMIT[:12]} benchmark/code/train.jsonl[{n}].context",
                          "text": "\n".join(json.loads(l)["context"])})
    write("blind.jsonl", blind)


def write(name, items):
    with open(name, "w") as f:
        for d in items:
            f.write(json.dumps(d, ensure_ascii=True) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
