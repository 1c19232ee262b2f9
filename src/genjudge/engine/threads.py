"""CPU threads for torch: what Snakemake gave the job, so parallel jobs do not oversubscribe."""


def set_threads(n: int) -> None:
    import torch

    torch.set_num_threads(max(1, int(n)))
