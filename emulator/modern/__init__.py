"""The modern (broker-coordinated) generation: classic and KIP-848 protocols."""
