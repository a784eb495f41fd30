"""Chunked artifacts: files cut into content-defined chunks, new chunks packed into blobs.

A chunked artifact sends only the chunks the repository does not hold yet: its files are
cut by FastCDC (and first at safetensors tensor boundaries), chunks already in the
packs of the lineage parent or the newest checkpoints are referenced, new ones are packed
into blobs of at most 64 MiB, and each file gets a chunk index (JSON) saying where its
chunks are. Every pack an index names is a layer of the same manifest, so registry gc
and OCI copiers keep the artifact whole without knowing the format (registry/SPEC.md,
"Chunked checkpoints").

- chunker.py: the cuts (FastCDC 2020 via pyfastcdc, tensor boundaries).
- index.py: the chunk index format, its validation, the file view of a manifest.
- known.py: the chunks a repository already holds (indexes fetched once, cached by digest).
- pushing.py: a push's chunked files → packs and indexes.
- rebuild.py: a pull's chunked files ← ranged reads of the packs, every chunk verified.
"""
