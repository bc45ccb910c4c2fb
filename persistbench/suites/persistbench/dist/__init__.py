"""PersistBench's sharded distribution: pack, its Croissant metadata, fetch."""
