"""Per-node GPU and network metrics (DCGM and EFA exporters, read from Prometheus), and the peer comparison
that names the node, and the bottleneck, behind a slowdown."""
