"""What may be deleted and how: the one home every deleting path asks (`keep`), release tags
kept from moving (`protect`), leases between `registry gc` and pushes in flight (`lease`),
removal of a tag or manifest on any backend (`removal`), what stays of pruned content
(`tombstone`), and garbage collection (`gc`)."""
