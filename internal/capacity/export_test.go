package capacity

// Pruned exposes pruned.
var Pruned = pruned
