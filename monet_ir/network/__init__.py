"""The network of a multi-chip system: collective algorithms as rounds of messages
(`collectives`) and a link-level simulator with bandwidth, latency and contention (`sim`).
IR-free: chips, bytes and seconds in, times and energies out."""
