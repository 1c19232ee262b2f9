"""Everything that imports torch: loading, prompting, decoding, batch size, logprob, memory plan."""
