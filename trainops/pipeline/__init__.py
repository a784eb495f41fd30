"""The pipeline: stage plan, inputs digests, caching and executors."""
