"""Model files, read as a format: safetensors headers (bounded, checked before they are
believed) and the model facts ModelPack records (format, parameter size, precision,
architecture). Pure reading, below the registry: the registry (chunking, `registry show`'s
tensor summary in trainops.registry.tensors), release packaging and the Hub import use it,
so none of them imports another for it."""
