"""The throughput ingest API: POST /ingest/throughput from training scripts, its tokens and its checks; and
training logs read into the same samples (`training_logs/`, for `pitcrew throughput import` and `replay --format`)."""
