"""The boto3 side of the s3:// backend: one shared client, and its errors as TrainopsErrors.

boto3 is imported here, inside functions, so that only a command that touches an s3://
registry pays for it. The client follows the standard AWS chain for credentials and
region, honours AWS_ENDPOINT_URL (S3-compatible servers: MinIO, Ceph, moto) natively, and
AWS_REGION ahead of AWS_DEFAULT_REGION. botocore clients are thread-safe: the backend
shares one across its transfer threads, with a connection pool sized for them.
"""

from __future__ import annotations

import base64
import os
import zlib
from collections.abc import Iterator
from typing import Any

from trainops.errors import ExistsError, NotFoundError, RemoteError, TrainopsError
from trainops.retry import RETRY_STATUS, Backoff, RetryPolicy, retry_after_seconds

DEFAULT_MAX_ATTEMPTS = 6  # botocore "standard" retries: throttling, 5xx, dropped connections

# S3 error codes that mean "these credentials may not do this" (never echo the server text:
# it can carry the access key id or the string that was signed).
_CREDENTIAL_CODES = frozenset(
    {
        "AccessDenied",
        "AllAccessDisabled",
        "AccountProblem",
        "ExpiredToken",
        "InvalidAccessKeyId",
        "InvalidToken",
        "InvalidSecurity",
        "SignatureDoesNotMatch",
        "TokenRefreshRequired",
        "InvalidClientTokenId",
        "UnrecognizedClientException",
        "Forbidden",
        "403",
    }
)
_MISSING_CODES = frozenset({"NoSuchKey", "NotFound", "404"})
_CONDITION_CODES = frozenset({"PreconditionFailed", "ConditionalRequestConflict", "412"})

CREDENTIALS_HINT = (
    "check the AWS credentials trainops finds (AWS_PROFILE, AWS_ACCESS_KEY_ID and "
    "AWS_SECRET_ACCESS_KEY, or the instance/pod role) and that they may read and write "
    "this bucket"
)


class KeyMissing(NotFoundError):
    """An object (or an object's bucket, for HEAD requests) is absent. Callers reword it."""


class UploadMissing(NotFoundError):
    """A multipart upload was completed or aborted by someone else."""


class ConditionFailed(ExistsError):
    """A conditional write lost (If-Match / If-None-Match: 412, or 409 conflict)."""


class Unsupported(RemoteError):
    """The S3-compatible server does not implement a request or header (NotImplemented)."""


def make_client(*, max_pool_connections: int, max_attempts: int | None) -> Any:
    """A boto3 S3 client from the standard chain, with a pool for parallel parts. Retries
    (throttling, 5xx, dropped connections) are trainops.retry's: each one is logged with its
    reason and wait, Retry-After is honoured, and the waiting is bounded."""
    import boto3  # lazy: loads boto3
    import botocore.session  # lazy: loads urllib3
    from botocore.config import Config  # lazy: loads urllib3

    core = botocore.session.get_session()  # reads the AWS_* variables and ~/.aws/config
    session = boto3.session.Session(botocore_session=core, region_name=os.environ.get("AWS_REGION") or None)
    configured = core.get_config_variable("max_attempts")
    attempts = max_attempts or (int(configured) if configured else DEFAULT_MAX_ATTEMPTS)
    config = Config(
        max_pool_connections=max_pool_connections,
        retries={"mode": "standard", "total_max_attempts": 1},  # botocore's own: none, see below
        connect_timeout=10,
        read_timeout=120,
        tcp_keepalive=True,
        # trainops verifies every blob against its sha256 itself; botocore need not hash again
        response_checksum_validation="when_required",
    )
    client = session.client("s3", config=config)
    client.meta.events.register_first("needs-retry.s3", _RetryHook(attempts, endpoint_of(client)))
    return client


_RETRY_CODES = frozenset({"Throttling", "ThrottlingException", "SlowDown", "RequestTimeout", "InternalError"})


class _RetryHook:
    """botocore's needs-retry event answered by trainops.retry: the seconds to wait before
    the next attempt (botocore then sleeps and resends, rewinding the body), or None."""

    def __init__(self, attempts: int, endpoint: str) -> None:
        self.policy = RetryPolicy(attempts=attempts, base=0.2)
        self.endpoint = endpoint

    def __call__(self, *, response: Any, caught_exception: Any, request_dict: Any, operation: Any, **_: Any) -> Any:
        reason, retry_after = _transient(response, caught_exception)
        if reason is None:
            return None
        context = request_dict.setdefault("context", {})
        backoff = context.get("trainops_backoff")
        if backoff is None:
            backoff = context["trainops_backoff"] = Backoff(
                f"S3 {operation.name} at {self.endpoint}", policy=self.policy
            )
        return backoff.next_delay(reason, retry_after=retry_after_seconds(retry_after))


def _transient(response: Any, caught: Any) -> tuple[str | None, str | None]:
    """(why, Retry-After) of a failed attempt worth retrying: a dropped connection, or a
    throttling/5xx answer; (None, None) for success and for failures a retry cannot fix."""
    from botocore import exceptions as bx  # lazy: loads botocore

    if caught is not None:
        retryable = (bx.ConnectionError, bx.HTTPClientError, bx.ConnectionClosedError, bx.ReadTimeoutError)
        return (type(caught).__name__, None) if isinstance(caught, retryable) else (None, None)
    if response is None:
        return None, None
    http, parsed = response
    status = getattr(http, "status_code", 0)
    code = str(((parsed or {}).get("Error") or {}).get("Code") or "")
    if status not in RETRY_STATUS and code not in _RETRY_CODES:
        return None, None
    return f"{status} {code}".strip(), http.headers.get("Retry-After")


def endpoint_of(client: Any) -> str:
    return str(getattr(getattr(client, "meta", None), "endpoint_url", "") or "the S3 endpoint")


def translate(exc: BaseException, *, op: str, bucket: str, key: str, endpoint: str) -> TrainopsError | None:
    """The TrainopsError for a botocore exception (None for others); says what to do next."""
    from botocore import exceptions as bx  # lazy: loads botocore

    where = f"s3://{bucket}/{key}" if key else f"s3://{bucket}"
    if isinstance(exc, bx.ClientError):
        error = exc.response.get("Error") or {}
        code = str(error.get("Code") or "")
        status = (exc.response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
        if code == "NoSuchBucket":
            return NotFoundError(
                f"S3 bucket {bucket!r} does not exist at {endpoint}",
                hint=f"create it (aws s3 mb s3://{bucket}) or correct the registry URL",
            )
        if code == "NoSuchUpload":
            return UploadMissing(f"multipart upload of {where} no longer exists")
        if code in _MISSING_CODES or status == 404:
            return KeyMissing(f"{where} does not exist")
        if code in _CONDITION_CODES or status in (409, 412):
            return ConditionFailed(f"{where} changed while trainops was writing it ({op})")
        if code == "NotImplemented" or status == 501:
            return Unsupported(f"{endpoint} does not implement {op} as trainops sends it ({where})")
        if code in _CREDENTIAL_CODES or status == 403:
            return RemoteError(f"S3 refused {op} on {where} ({code or status})", hint=CREDENTIALS_HINT)
        message = str(error.get("Message") or "")
        return RemoteError(
            f"S3 {op} on {where} failed after retries: {code or status} {message}".rstrip(),
            hint=f"retry later; if it persists, check the service at {endpoint}",
        )
    if isinstance(exc, (bx.NoCredentialsError, bx.PartialCredentialsError)):
        return RemoteError(f"no usable AWS credentials for {where}", hint=CREDENTIALS_HINT)
    if isinstance(exc, bx.CredentialRetrievalError):
        return RemoteError(f"could not obtain AWS credentials for {where}", hint=CREDENTIALS_HINT)
    if isinstance(exc, (bx.ConnectionError, bx.HTTPClientError)):
        return RemoteError(
            f"cannot reach S3 at {endpoint} ({op} {where}): {type(exc).__name__}",
            hint="check that the endpoint is up and that AWS_ENDPOINT_URL names it "
            "(unset AWS_ENDPOINT_URL to use AWS itself)",
        )
    if isinstance(exc, bx.BotoCoreError):
        return RemoteError(f"S3 {op} on {where} failed: {exc}")
    return None


def is_stream_error(exc: BaseException) -> bool:
    """A connection dropped or timed out while a response body was being read."""
    from botocore import exceptions as bx  # lazy: loads botocore
    from urllib3 import exceptions as ux  # lazy: loads urllib3

    return isinstance(exc, (bx.HTTPClientError, bx.IncompleteReadError, ux.ProtocolError, ux.ReadTimeoutError))


class S3Ops:
    """One bucket through one shared client: calls with translated errors, paginated lists."""

    def __init__(self, client: Any, bucket: str) -> None:
        self.client = client
        self.bucket = bucket
        self.endpoint = endpoint_of(client)

    def call(self, op: str, key: str = "", **kwargs: Any) -> Any:
        if key:
            kwargs["Key"] = key
        try:
            return getattr(self.client, op)(Bucket=self.bucket, **kwargs)
        except Exception as exc:
            mapped = translate(exc, op=op, bucket=self.bucket, key=key, endpoint=self.endpoint)
            if mapped is None:
                raise
            raise mapped from exc

    def pages(
        self, prefix: str, *, page_size: int, delimiter: str | None = None
    ) -> Iterator[tuple[list[dict[str, Any]], list[str]]]:
        """(objects, common prefixes) per ListObjectsV2 page under prefix."""
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"Prefix": prefix, "MaxKeys": page_size}
            if delimiter:
                kwargs["Delimiter"] = delimiter
            if token:
                kwargs["ContinuationToken"] = token
            page = self.call("list_objects_v2", **kwargs)
            yield (
                list(page.get("Contents") or []),
                [str(p["Prefix"]) for p in page.get("CommonPrefixes") or []],
            )
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not token:
                return

    def keys(self, prefix: str, *, page_size: int) -> Iterator[str]:
        for objects, _ in self.pages(prefix, page_size=page_size):
            for obj in objects:
                yield str(obj["Key"])

    def get_bytes(self, key: str) -> tuple[bytes, str, str | None]:
        """(body, ETag, ContentType) of a small object; KeyMissing if absent."""
        resp = self.call("get_object", key)
        with resp["Body"] as body:
            data = body.read()
        return data, str(resp.get("ETag") or ""), resp.get("ContentType")


def crc32_b64(data: bytes | bytearray | memoryview) -> str:
    """S3's ChecksumCRC32: base64 of the big-endian CRC-32."""
    return base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()


def sha256_b64(digest: str) -> str:
    """S3's ChecksumSHA256 for an OCI digest `sha256:<hex>`."""
    return base64.b64encode(bytes.fromhex(digest.split(":", 1)[1])).decode()
