package events

// Decoders are the kinds Decode reads, for the test that every one has a stored shape.
var Decoders = decoders
