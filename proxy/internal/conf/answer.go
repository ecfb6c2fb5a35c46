package conf

// defaultAnswerBytes bounds the answer an answer step reads when none of
// the tool's steps gives a bound: 1 MiB.
const DefaultAnswerBytes = 1 << 20
