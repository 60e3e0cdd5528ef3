"""Benchmark: workloads, an httpx streaming client, and pure metric summaries."""
