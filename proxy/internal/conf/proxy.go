package conf

// HeaderEnvelope is the request header by which a caller asks for the envelope.
const HeaderEnvelope = "X-Toolgate-Envelope"

// HeaderErrorCode carries error.code on every answer toolgate made itself or
// rewrote as a failure.
const HeaderErrorCode = "X-Toolgate-Error-Code"
