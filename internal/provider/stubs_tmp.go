package provider

// TEMPORARY: replaced by the real implementations.
