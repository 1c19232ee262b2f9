"""The data of a run: datasets from files or the hub (`dataset`, a row's fields `fields`, `hf_dataset`), conversations
(`conversation`), samples (`samples`), shards and their files and sizes (`sharding`, `shard_files`,
`shard_sizing`), the pairwise baseline's answers (`baseline`).

May import: errors, store.
"""
