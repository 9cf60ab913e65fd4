"""The throughput ingest API: POST /ingest/throughput from training scripts, its tokens and its checks."""
