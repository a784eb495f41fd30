"""Model signing and SLSA provenance as referrers of what trainops publishes; verification.

- keys: signing and public keys, checked and fingerprinted before anything is pushed;
- signer: model signing's signers (EC key file, PKCS#11) over in-toto statements;
- model_sig: the model signature in OpenSSF model signing's format, from the layer digests;
- provenance: SLSA provenance v1 from the lineage;
- records: both as OCI referrers (Sigstore bundles, laid out as cosign lays them out);
- attest: attaching them at release (and, with release.signing.checkpoints, per checkpoint);
- verify: `release verify`, `pull --verify-signature`, rollout start and the browser.
`model_signing` (and sigstore under it) is imported only when signing or verifying.
"""
