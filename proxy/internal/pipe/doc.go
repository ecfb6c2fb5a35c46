// Package pipe is one call from arrival to the end of its answer: the Call
// every step reads and writes, the step interfaces (RequestStep,
// AnswerStep) and a tool's compiled Chain, dispatch upstream and the
// answer's handling (respond.go: refusals, the envelope, the raw answer
// watched as it streams), the event finished and handed to the Recorder,
// and the snapshot a call runs on. It knows nothing of which steps exist:
// proxy compiles a tool's chain from steps and mcpcall. A call on an MCP
// route reaches mcpcall through Host.MCPHandle and its MCPExchange.
package pipe
