"""The engine every science uses: activation extraction and its cache, metrics and intervals, result envelopes, renamed keywords, guarded console scripts."""
