package tickets

// EnterRates are, for a store whose items each take writeUnits write
// units a second, the enters a second above which a program takes its
// tickets from shards, and the most its shards take together.
func EnterRates(writeUnits float64) (shardsFrom, most float64) {
	s := Shards{writeUnits: writeUnits}
	return s.switchOn(), MaxShards * s.perShard()
}
