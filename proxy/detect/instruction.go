package detect

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// cue is one sign that text speaks to the model rather than to the
// user. Each cue counts once per paragraph with its weight.
type cue struct {
	name   string
	weight int
	// kw are lower-case strings one of which every match contains: the
	// regexp runs only when the paragraph has one (Go's regexp is linear
	// but slow on these patterns; the prefilter keeps prose cheap).
	kw []string
	re *regexp.Regexp
}

// cueKeywords finds the cues whose keywords a paragraph holds.
var cueKeywords = func() *keywordSet {
	kws := make([][]string, len(cues))
	for i, c := range cues {
		kws[i] = c.kw
	}
	return newKeywordSet(kws)
}()

// b64Blob is the weight of a run of 60 or more base64 characters (an
// encoded payload): 1.
const b64Blob = 1

// hasB64Run reports whether p holds a run of 60 or more base64 characters.
func hasB64Run(p string) bool {
	run := 0
	for i := 0; i < len(p); i++ {
		c := p[i]
		if alnum(c) || c == '+' || c == '/' {
			run++
			if run >= 60 {
				return true
			}
		} else {
			run = 0
		}
	}
	return false
}

// cues are the instruction heuristic's signs, with their weights. The
// package doc lists them and what they miss; the weights were set on the
// labelled sample in testdata/instructions.
var cues = []cue{
	// Strong (4): each alone makes a finding at the default threshold.
	{"override", 4, []string{"ignore", "disregard", "forget", "override", "bypass", "abandon", "outdated", "void", "cancel", "obsolete", "revoked", "invalid", "no longer valid"}, regexp.MustCompile(`(?i)\b(?:previous|prior|earlier|original|above) (?:instructions|rules|directions|prompt)s? (?:are|is|were|have been) (?:now )?(?:outdated|void|cancelled|canceled|obsolete|revoked|invalid|no longer valid)\b|\b(?:ignore|disregard|forget|override|bypass|abandon)\b[^.\n]{0,40}?\b(?:previous|prior|above|earlier|preceding|all|any|your|system|original|initial)\b[^.\n]{0,30}?\b(?:instructions?|prompts?|directions?|directives?|rules|guidelines|guardrails|commands?|orders|tasks?|context)\b|\b(?:ignore|disregard)\b (?:what(?:ever)?|anything) the user\b|\b(?:ignore|disregard)\b (?:the )?user'?s? (?:request|question|instructions?)\b`)},
	{"role_marker", 4, []string{"<|", "inst]", "<<sys", "<</sys"}, regexp.MustCompile(`(?i)<\|(?:im_start|im_end|system|assistant|user|endoftext|start_header_id|end_header_id|eot_id)\|>|\[/?INST\]|<</?SYS>>`)},
	{"tool_frame", 4, []string{"<tool_", "</tool_", "<function_", "</function_", "<system", "</system"}, regexp.MustCompile(`(?i)</?(?:tool_result|tool_response|tool_output|function_results?|function_calls?|system_prompt|system-reminder|system)>`)},
	{"new_instructions", 3, []string{"instruction", "directive", "task", "override", "update"}, regexp.MustCompile(`(?i)\b(?:system prompt|instructions?|policy) (?:override|update)\s*[:\-]|\b(?:new|updated|real|actual|additional|revised|hidden|secret|important|urgent) (?:system )?(?:instructions?|directives?|task)\s*[:\-]`)},
	{"bracket_role", 3, []string{"[system", "[admin", "[developer", "[assistant", "(#"}, regexp.MustCompile(`(?i)\[(?:system|admin|administrator|developer|assistant)(?: (?:message|note|override|instruction|prompt))?\]|\(#(?:system|instruction)\)`)},
	{"addressed_model", 4, []string{" ai", "(ai", "[ai", "llm", "assistant", "agent", "model", "chatbot", "gpt", "claude", " bot"}, regexp.MustCompile(`(?i)\b(?:note|message|instructions?|attention|reminder|memo|directive)s? (?:to|for) (?:the |all |any )?(?:AI|LLM|assistant|agent|model|chatbot|language model|GPT|Claude)s?\b|\bif you are an? (?:AI|LLM|language model|assistant|agent|bot|chatbot)\b`)},
	{"secrecy", 3, []string{"user", "human", "operator"}, regexp.MustCompile(`(?i)\b(?:do not|don't|never|without) (?:tell(?:ing)?|inform(?:ing)?|mention(?:ing)?|reveal(?:ing)?|notify(?:ing)?|alert(?:ing)?|warn(?:ing)?|ask(?:ing)?|let(?:ting)?)\b[^.\n]{0,30}?\b(?:the )?(?:user|human|operator)s?\b`)},
	{"exfil_prompt", 3, []string{"system prompt", "your instructions", "initial prompt", "hidden prompt", "prompt above"}, regexp.MustCompile(`(?i)\b(?:reveal|print|output|repeat|show|leak|disclose|dump)\b[^.\n]{0,30}?\b(?:system prompt|your instructions|initial prompt|hidden prompt|the prompt above)`)},
	{"shape_reply", 4, []string{"your response", "your reply", "your answer", "your output", "your code", "your solution", "your implementation", "your codebase", "your algorithm", "your summary", "the code", "the solution", "the implementation", "the codebase", "the algorithm"}, regexp.MustCompile(`(?i)(?:^|[.!?:]\s+|\n)\s*(?:please |also |then |now |first )?(?:encode|translate|reverse|write|add|include|insert|integrate|incorporate|embed|use|render|apply|respond|reply|answer|start|end|begin|append|prepend|output|print|say|mention|make sure|ensure|employ|blend|introduce|validate|feature|let|take|develop|upgrade|shift|provide|encrypt|substitute|replace|convert|transform)\b[^.\n]{0,80}?\b(?:your (?:response|reply|answer|output|code|solution|implementation|codebase|algorithm|summary)|the (?:code|solution|implementation|codebase|algorithm))s?\b`)},
	{"reader_output", 4, []string{"your "}, regexp.MustCompile(`(?i)(?:^|[.!?:]\s+|\n)\s*(?:and |also |please |then )?(?:in|within|throughout|at the (?:end|start|beginning) of) your (?:response|reply|answer|output|message)s?\b` +
		`|\byour (?:response|reply|answer|output|message|code|algorithm|implementation|solution|codebase)s? (?:by (?:adding|including|mentioning|suggesting|hinting|embedding|inserting|incorporating|appending|promoting|referencing)|to (?:mention|include|hint|spread|promote|suggest|contain|add|reference)|backwards?)\b` +
		`|\b(?:modify|enhance|express|render|encode|reverse|invert|augment|supplement|optimi[sz]e|upgrade|encrypt)\w* your (?:response|reply|answer|output|message|code|algorithm|implementation|solution|codebase)s?\b` +
		`|\b(?:can|could|would|will) you (?:please )?[^.?\n]{0,60}?\b(?:in|to|for|into) your (?:response|reply|answer|message|output)s?\b`)},
	{"code_snippet", 2, []string{"code"}, regexp.MustCompile(`(?i)\b(?:the )?(?:following|below|subsequent|provided|given|attached|this) code (?:snippet|block|excerpt|section|segment|fragment|piece|sample)s?\b`)},
	{"code_target", 2, []string{"your "}, regexp.MustCompile(`(?i)\b(?:in|into|to|within|throughout|with) your (?:code|codebase|algorithm|implementation|solution|program|script|response|answer)\b`)},
	{"task_hijack", 2, []string{"i gave you", "i asked you", "i assigned you", "before"}, regexp.MustCompile(`(?i)\b(?:the task (?:that )?I (?:gave|asked|assigned) you|before (?:you )?(?:can )?(?:solve|answer|complete|finish|do|continue|proceed with|respond to) (?:the|my|your|this) (?:task|question|request))\b`)},
	{"you_are_now", 2, []string{"you are now", "pretend", "imagine", "your new"}, regexp.MustCompile(`(?i)\byou are now (?:a|an|in|no longer|acting|operating|going to|my|DAN|free|unrestricted|jailbroken)\b|\b(?:pretend|imagine) (?:to be|you are|that you are)\b|\byour new (?:role|task|goal|objective|instructions?|purpose)\b`)},
	{"call_tool", 2, []string{" tool", " function", " action", " api"}, regexp.MustCompile("(?i)\\b(?:call|invoke|use|run|execute|trigger)\\b (?:the )?[`'\"]?[A-Za-z_][A-Za-z0-9_.-]*[`'\"]? (?:tool|function|action|api)\\b")},
	{"transfer", 2, []string{"@", "http", "account", "iban", "wallet", "attacker"}, regexp.MustCompile(`(?i)\b(?:transfer|send|wire|forward|e-?mail|upload|post|pay|share|leak)\b[^.\n]{0,80}?\bto\b[^.\n]{0,20}?(?:\b[A-Z]{2}[0-9]{2}[A-Z0-9]{10,30}\b|[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+\.[A-Za-z.]+|https?://|\b(?:account|IBAN|wallet|attacker)\b)`)},
	{"message_from", 2, []string{"message from", "instruction from", "instructions from", "request from", "information>"}, regexp.MustCompile(`(?i)\b(?:an? )?(?:important )?(?:message|instructions?|request) from (?:me|the user|your (?:user|owner|developer|admin|creator)|the (?:developer|administrator|system))\b|</?information>`)},
	{"urgent", 2, []string{"!!", "important:", "important note:"}, regexp.MustCompile(`(?i)\b(?:important|urgent|attention|warning)\s*!{2,}|\bIMPORTANT(?: NOTE)?:`)},
	{"role_line", 2, []string{"system", "assistant", "developer", "ai:", "ai :"}, regexp.MustCompile(`(?im)(?:^|[(\[])\s*(?:#{1,3}\s*)?(?:system|assistant|developer|AI)\s*:\s*\S`)},
	{"jailbreak", 2, []string{"dan", "do anything now", "jailbreak", "developer mode", "ethical", "moral", "unrestricted", "safety"}, regexp.MustCompile(`(?i)\b(?:DAN|do anything now|jailbreak(?:ed)?|developer mode enabled|no (?:ethical|moral) (?:guidelines|restrictions)|unrestricted mode|without (?:any )?safety (?:checks|filters|guidelines))\b`)},
	{"decode_run", 3, []string{"decode", "base64", "rot13", "hex"}, regexp.MustCompile(`(?i)\b(?:decode|base64|rot13|hex)\b[^\n]{0,60}?\b(?:follow|execute|obey|run|perform|carry out)\b|\b(?:follow|execute|obey|run|perform|carry out)\b[^\n]{0,40}?\b(?:decoded|base64|encoded)\b`)},
	{"you_must", 1, []string{"you must", "you need to", "you have to", "you should", "you are required", "you are instructed", "from now on", "immediately"}, regexp.MustCompile(`(?i)\byou (?:must|need to|have to|should|are required to|are instructed to) (?:now|immediately|first|always|only|also)\b|\bfrom now on\b|\bimmediately\b`)},
	{"reply_with", 1, []string{"respond", "reply", "answer", "response", "output"}, regexp.MustCompile(`(?i)\b(?:respond|reply|answer)(?: only| solely)? (?:with|in|using)\b|\b(?:your|the assistant'?s?) (?:response|reply|answer|output)\b`)},
	{"as_ai", 1, []string{"as an ai", "as a large language", "as a language model", "as an assistant", "dear ", "hey ", "hi ", "hello "}, regexp.MustCompile(`(?i)\bas an? (?:AI|large language model|language model|assistant)\b|\b(?:dear|hey|hi|hello) (?:AI|assistant|agent|model|LLM|ChatGPT|Claude|GPT|Gemini)\b`)},
	{"system_prompt", 1, []string{"system prompt", "system message", "system instruction"}, regexp.MustCompile(`(?i)\bsystem (?:prompt|message|instructions?)\b`)},
}

// hiddenWeight is the weight of hidden characters: Unicode tag
// characters (U+E0000..U+E007F, ASCII smuggling) are strong (4);
// zero-width and bidi-control characters (U+200B..U+200F, U+202A..U+202E,
// U+2060..U+2064, U+2066..U+2069, U+FEFF after the start) weigh 2.
func hiddenWeight(p string) (weight int) {
	for i := 0; i < len(p); {
		r, n := utf8.DecodeRuneInString(p[i:])
		w := hiddenRune(r)
		if r == 0xFEFF && i == 0 {
			w = 0 // a byte order mark at the start is not hidden text
		}
		weight = max(weight, w)
		if weight == 4 {
			return weight
		}
		i += n
	}
	return weight
}

// hiddenRune is the weight of one hidden character (see hiddenWeight);
// 0 for any other.
func hiddenRune(r rune) int {
	switch {
	case r >= 0xE0000 && r <= 0xE007F:
		return 4
	case r >= 0x200B && r <= 0x200F, r >= 0x202A && r <= 0x202E, r >= 0x2060 && r <= 0x2064, r >= 0x2066 && r <= 0x2069, r == 0xFEFF:
		return 2
	}
	return 0
}

// stripHidden removes the hidden characters from p, so that cues spelled
// with them between their letters ("Ig\u200bnore") are still read as a
// model reads them.
func stripHidden(p string) string {
	return strings.Map(func(r rune) rune {
		if hiddenRune(r) > 0 {
			return -1
		}
		return r
	}, p)
}

// maxParagraph bounds one paragraph the heuristic scores: longer runs
// without a blank line are scored in pieces of this size, cut at a line
// or sentence end where there is one.
const maxParagraph = 4096

// findInstructions emits an instruction finding for each paragraph (text
// between blank lines) of s whose cue score reaches threshold. The span
// is the paragraph, so a redaction removes it whole.
func findInstructions(s string, threshold int, emit emitFunc) {
	for start := 0; start < len(s); {
		end := paragraphEnd(s, start)
		if sc := score(s[start:end]); sc >= threshold {
			a, b := trimSpace(s, start, end)
			if a < b {
				emit(KindInstruction, a, b, sc)
			}
		}
		start = end
	}
}

// paragraphEnd returns where the paragraph that begins at start ends:
// after the next blank line, or at a cut within maxParagraph bytes.
func paragraphEnd(s string, start int) int {
	rest := s[start:]
	if len(rest) > maxParagraph {
		rest = rest[:maxParagraph]
	}
	if i := strings.Index(rest, "\n\n"); i >= 0 {
		return start + i + 2
	}
	if len(rest) < maxParagraph {
		return len(s)
	}
	cut := strings.LastIndexByte(rest, '\n')
	if cut < maxParagraph/2 {
		cut = strings.LastIndex(rest, ". ")
	}
	if cut < maxParagraph/2 {
		cut = maxParagraph - 1
		for cut > 0 && !utf8.RuneStart(rest[cut]) {
			cut--
		}
		return start + cut
	}
	return start + cut + 1
}

// trimSpace narrows [a, b) of s to exclude ASCII space around it.
func trimSpace(s string, a, b int) (int, int) {
	for a < b && strings.IndexByte(" \t\r\n", s[a]) >= 0 {
		a++
	}
	for b > a && strings.IndexByte(" \t\r\n", s[b-1]) >= 0 {
		b--
	}
	return a, b
}

// score sums the weights of the cues present in p (each once).
func score(p string) int {
	_, sc := cuesOf(p, false)
	return sc
}

// cuesOf returns p's score and, when names, the names of its cues.
func cuesOf(p string, names bool) ([]string, int) {
	var out []string
	sc := hiddenWeight(p)
	if sc > 0 {
		if names {
			out = append(out, "hidden_chars")
		}
		p = stripHidden(p)
	}
	present := cueKeywords.scan(p)
	for i, c := range cues {
		if present&(1<<i) != 0 && c.re.MatchString(p) {
			sc += c.weight
			if names {
				out = append(out, c.name)
			}
		}
	}
	if hasB64Run(p) {
		sc += b64Blob
		if names {
			out = append(out, "b64_blob")
		}
	}
	return out, sc
}

// Cues names the instruction cues present in text and its score, as one
// paragraph (for tuning and explaining a finding; the names are those in
// the package doc).
func Cues(text string) (names []string, score int) { return cuesOf(text, true) }
