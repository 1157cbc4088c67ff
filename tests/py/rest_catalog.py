#!/usr/bin/env python3
"""A small Iceberg REST catalog server for the integration tests.

Usage (run with the python that tests/py/setup-venv prints):

    rest_catalog.py --port PORT --warehouse /abs/dir [--catalog-db /abs/file.db]
                    [--catalog-name rest] [--tls-cert CERT.pem --tls-key KEY.pem]
                    [--token TOKEN] [--client ID:SECRET]

With --tls-cert/--tls-key it serves https (and prints https://...). With --token or
--client, every request but the token endpoint needs `Authorization: Bearer T`, where T is
--token or a token the endpoint issued for the client credentials of --client (the OAuth2
client credentials grant, `grant_type=client_credentials&client_id=..&client_secret=..`);
anything else gets 401 NotAuthorizedException. Without either, no auth is checked.

Binds 127.0.0.1:PORT (PORT 0 picks a free port) and prints, flushed, on stdout:

    listening on http://127.0.0.1:PORT

once it accepts connections. Each request is logged to stderr. Stops on SIGINT / SIGTERM.

Storage: pyiceberg's SqlCatalog on SQLite (default database `<warehouse>/rest-catalog.db`),
with the catalog name `rest` (the `catalog_name` column; `--catalog-name` changes it) and
the warehouse `file://<warehouse>`. Tables go to `file://<warehouse>/<ns>/<table>` (levels of
a nested namespace joined with "."; a namespace `location` property overrides), so a
client on the same machine reads and writes the data files directly (the server hands out no
FileIO config or credentials). The database can be read directly with pyiceberg's SqlCatalog
(`SqlCatalog("rest", uri="sqlite:////abs/file.db")`) or with read_table.py
(`--catalog-name rest --catalog-uri sqlite:////abs/file.db`).

Endpoints (Iceberg REST OpenAPI spec; error bodies are
`{"error": {"message", "type", "code"}}`):

    GET    /v1/config                               {"defaults": {}, "overrides": {}}
    POST   /v1/oauth/tokens                         a bearer token (checks --client, if given)
    GET    /v1/namespaces[?parent=a%1Fb]            list namespaces
    POST   /v1/namespaces                           create a namespace (409 if it exists)
    GET    /v1/namespaces/{ns}                      namespace and its properties (404 if missing)
    HEAD   /v1/namespaces/{ns}                      204 / 404
    DELETE /v1/namespaces/{ns}                      204 (409 if not empty)
    POST   /v1/namespaces/{ns}/properties           update namespace properties
    GET    /v1/namespaces/{ns}/tables               list tables
    POST   /v1/namespaces/{ns}/tables               create a table (stage-create supported)
    POST   /v1/namespaces/{ns}/register             register a table from a metadata file
    GET    /v1/namespaces/{ns}/tables/{t}           load a table (404 if missing)
    HEAD   /v1/namespaces/{ns}/tables/{t}           204 / 404
    POST   /v1/namespaces/{ns}/tables/{t}           commit (409 CommitFailedException when a
                                                    requirement fails)
    DELETE /v1/namespaces/{ns}/tables/{t}[?purgeRequested=true]   drop (and purge) a table
    POST   /v1/tables/rename                        rename a table

Multi-level namespaces are joined with the unit separator (0x1F, `%1F` in the URL). An
optional path prefix (`/v1/{prefix}/namespaces/...`) is accepted and ignored. Every catalog
operation runs under one lock, so commits are serialized and their requirement checks are
atomic.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import traceback
import types
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import pydantic
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import (
    CommitFailedException,
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NoSuchNamespaceError,
    NoSuchTableError,
    TableAlreadyExistsError,
    ValidationError as IcebergValidationError,
)
from pyiceberg.partitioning import PARTITION_FIELD_ID_START, UNPARTITIONED_PARTITION_SPEC, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import CommitTableRequest, Table
from pyiceberg.table.metadata import new_table_metadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER, SortOrder
from pyiceberg.table.update import AddSchemaUpdate, AssertCreate

NAMESPACE_SEPARATOR = "\x1f"
DEFAULT_CATALOG_NAME = "rest"
API_ROOTS = {"config", "oauth", "namespaces", "tables"}


class HttpError(Exception):
    """An error answered with the REST error body."""

    def __init__(self, code: int, kind: str, message: str):
        super().__init__(message)
        self.code = code
        self.kind = kind
        self.message = message


def not_found_namespace(ns: tuple[str, ...]) -> HttpError:
    return HttpError(404, "NoSuchNamespaceException", f"Namespace does not exist: {'.'.join(ns)}")


def not_found_table(ns: tuple[str, ...], name: str) -> HttpError:
    return HttpError(404, "NoSuchTableException", f"Table does not exist: {'.'.join(ns + (name,))}")


def parse_namespace(segment: str) -> tuple[str, ...]:
    """A namespace path segment (already percent-decoded) to a tuple of levels."""
    parts = tuple(segment.split(NAMESPACE_SEPARATOR))
    if not segment or any(not p for p in parts):
        raise HttpError(400, "BadRequestException", f"Invalid namespace: {segment!r}")
    return parts


def assign_schema_ids(updates: list[Any], schemas: list[Schema]) -> list[Any]:
    """`updates` with each added schema's id assigned by the server, whatever id the client
    sent, as Java's `TableMetadata.Builder` and iceberg-rust's assign it: one past the
    highest (Java also reuses the id of an equal schema; not needed here). pyiceberg's own
    metadata update keeps the client's id, so a client that sends the default (0, as
    iceberg-rust's `UpdateSchemaAction` does) would add a second schema 0 and never make
    it current."""
    known = list(schemas)
    assigned = []
    for update in updates:
        if isinstance(update, AddSchemaUpdate):
            schema_id = max((s.schema_id for s in known), default=-1) + 1
            schema = update.schema_.model_copy(update={"schema_id": schema_id})
            known.append(schema)
            update = update.model_copy(update={"schema_": schema})
        assigned.append(update)
    return assigned


def metadata_json(table_metadata: Any) -> Any:
    """TableMetadata in spec form (kebab-case keys, nulls omitted)."""
    return json.loads(table_metadata.model_dump_json())


def load_result(table: Table) -> dict[str, Any]:
    return {
        "metadata-location": table.metadata_location,
        "metadata": metadata_json(table.metadata),
        "config": {},
    }


def as_str_dict(value: Any, what: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise HttpError(400, "BadRequestException", f"{what} must be an object")
    return {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in value.items()}


def parse_partition_spec(value: Any) -> PartitionSpec:
    """An (unbound) partition spec; iceberg-rust omits `field-id` and `spec-id`."""
    if value is None:
        return UNPARTITIONED_PARTITION_SPEC
    value = dict(value)
    value.setdefault("spec-id", 0)
    fields = []
    for pos, field in enumerate(value.get("fields") or []):
        field = dict(field)
        if field.get("field-id") is None:
            field["field-id"] = PARTITION_FIELD_ID_START + pos
        fields.append(field)
    value["fields"] = fields
    return PartitionSpec.model_validate(value)


def parse_sort_order(value: Any) -> SortOrder:
    if value is None:
        return UNSORTED_SORT_ORDER
    value = dict(value)
    if not value.get("fields"):
        return UNSORTED_SORT_ORDER
    value.setdefault("order-id", 1)
    return SortOrder.model_validate(value)


class RestCatalogService:
    """Maps REST requests onto a pyiceberg SqlCatalog."""

    def __init__(
        self,
        catalog: SqlCatalog,
        token: str | None = None,
        client: str | None = None,
        keep_schema_ids: bool = False,
    ):
        self.catalog = catalog
        self.keep_schema_ids = keep_schema_ids
        self.lock = threading.RLock()
        self.client = client
        self.tokens = {token} if token else set()
        self.auth = bool(token or client)

    def issue_token(self, body: Any) -> tuple[int, Any]:
        form = {k: v[0] for k, v in (body or {}).items()} if isinstance(body, dict) else {}
        if self.client is not None:
            given = f"{form.get('client_id', '')}:{form.get('client_secret', '')}"
            if form.get("grant_type") != "client_credentials" or given != self.client:
                return 401, {"error": "invalid_client", "error_description": "bad client credentials"}
        token = f"issued-{len(self.tokens)}-{os.urandom(8).hex()}"
        self.tokens.add(token)
        return 200, {
            "access_token": token,
            "token_type": "bearer",
            "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
            "expires_in": 86400,
        }

    def check_auth(self, authorization: str | None) -> None:
        if not self.auth:
            return
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or token not in self.tokens:
            raise HttpError(401, "NotAuthorizedException", "Not authorized: a valid bearer token is required")

    # ---- helpers -------------------------------------------------------------------------

    def require_namespace(self, ns: tuple[str, ...]) -> None:
        if not self.catalog.namespace_exists(ns):
            raise not_found_namespace(ns)

    def load(self, ns: tuple[str, ...], name: str) -> Table:
        self.require_namespace(ns)
        try:
            return self.catalog.load_table(ns + (name,))
        except NoSuchTableError:
            raise not_found_table(ns, name) from None

    # ---- routing -------------------------------------------------------------------------

    def handle(
        self, method: str, segs: list[str], query: dict[str, list[str]], body: Any, authorization: str | None = None
    ) -> tuple[int, Any]:
        """Returns (status, JSON body or None)."""
        if not segs or segs[0] != "v1":
            raise HttpError(404, "NotFoundException", "Unknown path")
        segs = segs[1:]
        if len(segs) >= 2 and segs[0] not in API_ROOTS:
            segs = segs[1:]  # an optional {prefix}

        if method == "POST" and segs == ["oauth", "tokens"]:
            return self.issue_token(body)
        self.check_auth(authorization)
        if method == "GET" and segs == ["config"]:
            return 200, {"defaults": {}, "overrides": {}}
        if method == "POST" and segs == ["tables", "rename"]:
            return self.rename_table(body)
        if not segs or segs[0] != "namespaces":
            raise HttpError(404, "NotFoundException", "Unknown path")

        with self.lock:
            if len(segs) == 1:
                if method == "GET":
                    return self.list_namespaces(query)
                if method == "POST":
                    return self.create_namespace(body)
            elif len(segs) == 2:
                ns = parse_namespace(segs[1])
                if method in ("GET", "HEAD"):
                    props = self.namespace_properties(ns)
                    return (204, None) if method == "HEAD" else (200, {"namespace": list(ns), "properties": props})
                if method == "DELETE":
                    return self.drop_namespace(ns)
            elif len(segs) == 3:
                ns = parse_namespace(segs[1])
                if segs[2] == "tables" and method == "GET":
                    return self.list_tables(ns)
                if segs[2] == "tables" and method == "POST":
                    return self.create_table(ns, body)
                if segs[2] == "properties" and method == "POST":
                    return self.update_namespace_properties(ns, body)
                if segs[2] == "register" and method == "POST":
                    return self.register_table(ns, body)
            elif len(segs) == 4 and segs[2] == "tables":
                ns = parse_namespace(segs[1])
                name = segs[3]
                if method in ("GET", "HEAD"):
                    table = self.load(ns, name)
                    return (204, None) if method == "HEAD" else (200, load_result(table))
                if method == "POST":
                    return self.commit_table(ns, name, body)
                if method == "DELETE":
                    purge = (query.get("purgeRequested") or ["false"])[0].lower() == "true"
                    return self.drop_table(ns, name, purge)
        raise HttpError(404, "NotFoundException", f"Unsupported: {method} /v1/{'/'.join(segs)}")

    # ---- namespaces ----------------------------------------------------------------------

    def list_namespaces(self, query: dict[str, list[str]]) -> tuple[int, Any]:
        parent: tuple[str, ...] = ()
        if query.get("parent") and query["parent"][0]:
            parent = parse_namespace(query["parent"][0])
            self.require_namespace(parent)
        namespaces = sorted(self.catalog.list_namespaces(parent))
        return 200, {"namespaces": [list(ns) for ns in namespaces]}

    def create_namespace(self, body: Any) -> tuple[int, Any]:
        if not isinstance(body, dict) or not isinstance(body.get("namespace"), list) or not body["namespace"]:
            raise HttpError(400, "BadRequestException", "namespace (a non-empty array of strings) is required")
        ns = tuple(str(p) for p in body["namespace"])
        if any(not p or "." in p for p in ns):
            # SqlCatalog stores namespaces joined with "."
            raise HttpError(400, "BadRequestException", f"Invalid namespace level in {list(ns)}")
        properties = as_str_dict(body.get("properties"), "properties")
        try:
            self.catalog.create_namespace(ns, properties)
        except NamespaceAlreadyExistsError:
            raise HttpError(409, "AlreadyExistsException", f"Namespace already exists: {'.'.join(ns)}") from None
        return 200, {"namespace": list(ns), "properties": self.namespace_properties(ns)}

    def namespace_properties(self, ns: tuple[str, ...]) -> dict[str, str]:
        try:
            return dict(self.catalog.load_namespace_properties(ns))
        except NoSuchNamespaceError:
            raise not_found_namespace(ns) from None

    def drop_namespace(self, ns: tuple[str, ...]) -> tuple[int, Any]:
        try:
            self.catalog.drop_namespace(ns)
        except NoSuchNamespaceError:
            raise not_found_namespace(ns) from None
        except NamespaceNotEmptyError as e:
            raise HttpError(409, "NamespaceNotEmptyException", str(e)) from None
        return 204, None

    def update_namespace_properties(self, ns: tuple[str, ...], body: Any) -> tuple[int, Any]:
        self.require_namespace(ns)
        body = body if isinstance(body, dict) else {}
        removals = set(body.get("removals") or [])
        updates = as_str_dict(body.get("updates"), "updates")
        try:
            summary = self.catalog.update_namespace_properties(ns, removals, updates)
        except ValueError as e:
            raise HttpError(422, "UnprocessableEntityException", str(e)) from None
        return 200, {"updated": list(summary.updated), "removed": list(summary.removed), "missing": list(summary.missing or [])}

    # ---- tables --------------------------------------------------------------------------

    def list_tables(self, ns: tuple[str, ...]) -> tuple[int, Any]:
        self.require_namespace(ns)
        idents = sorted(self.catalog.list_tables(ns))
        return 200, {"identifiers": [{"namespace": list(i[:-1]), "name": i[-1]} for i in idents]}

    def create_table(self, ns: tuple[str, ...], body: Any) -> tuple[int, Any]:
        if not isinstance(body, dict) or not body.get("name") or body.get("schema") is None:
            raise HttpError(400, "BadRequestException", "name and schema are required")
        name = str(body["name"])
        self.require_namespace(ns)
        schema = Schema.model_validate(body["schema"])
        spec = parse_partition_spec(body.get("partition-spec"))
        order = parse_sort_order(body.get("write-order"))
        properties = as_str_dict(body.get("properties"), "properties")
        location = body.get("location") or None
        if self.catalog.table_exists(ns + (name,)):
            raise HttpError(409, "AlreadyExistsException", f"Table already exists: {'.'.join(ns + (name,))}")
        if body.get("stage-create"):
            # Metadata only; the table is created by a later commit with assert-create.
            location = self.catalog._resolve_table_location(location, ".".join(ns), name)
            metadata = new_table_metadata(
                schema=schema, partition_spec=spec, sort_order=order, location=location, properties=properties
            )
            return 200, {"metadata": metadata_json(metadata), "config": {}}
        try:
            table = self.catalog.create_table(
                ns + (name,), schema=schema, location=location, partition_spec=spec, sort_order=order,
                properties=properties,
            )
        except TableAlreadyExistsError:
            raise HttpError(409, "AlreadyExistsException", f"Table already exists: {'.'.join(ns + (name,))}") from None
        return 200, load_result(table)

    def register_table(self, ns: tuple[str, ...], body: Any) -> tuple[int, Any]:
        if not isinstance(body, dict) or not body.get("name") or not body.get("metadata-location"):
            raise HttpError(400, "BadRequestException", "name and metadata-location are required")
        self.require_namespace(ns)
        name = str(body["name"])
        try:
            table = self.catalog.register_table(
                ns + (name,), body["metadata-location"], overwrite=bool(body.get("overwrite"))
            )
        except TableAlreadyExistsError:
            raise HttpError(409, "AlreadyExistsException", f"Table already exists: {'.'.join(ns + (name,))}") from None
        return 200, load_result(table)

    def commit_table(self, ns: tuple[str, ...], name: str, body: Any) -> tuple[int, Any]:
        if not isinstance(body, dict):
            raise HttpError(400, "BadRequestException", "a JSON object is required")
        body = dict(body)
        ident = body.get("identifier")
        if ident is not None and (tuple(ident.get("namespace") or ()) != ns or ident.get("name") != name):
            raise HttpError(400, "BadRequestException", f"identifier {ident} does not match the path")
        body["identifier"] = {"namespace": list(ns), "name": name}
        request = CommitTableRequest.model_validate(body)
        self.require_namespace(ns)
        try:
            table: Any = self.catalog.load_table(ns + (name,))
        except NoSuchTableError:
            if not any(isinstance(r, AssertCreate) for r in request.requirements):
                raise not_found_table(ns, name) from None
            # The create half of a create transaction (stage-create); SqlCatalog.commit_table
            # only asks the table for its name.
            table = types.SimpleNamespace(name=lambda: ns + (name,))
        updates = request.updates
        if isinstance(table, Table) and not self.keep_schema_ids:
            updates = assign_schema_ids(updates, table.metadata.schemas)
        try:
            response = self.catalog.commit_table(table, tuple(request.requirements), tuple(updates))
        except CommitFailedException as e:
            raise HttpError(409, "CommitFailedException", str(e)) from None
        except TableAlreadyExistsError as e:
            raise HttpError(409, "CommitFailedException", str(e)) from None
        return 200, {"metadata-location": response.metadata_location, "metadata": metadata_json(response.metadata)}

    def drop_table(self, ns: tuple[str, ...], name: str, purge: bool) -> tuple[int, Any]:
        self.require_namespace(ns)
        try:
            if purge:
                self.catalog.purge_table(ns + (name,))
            else:
                self.catalog.drop_table(ns + (name,))
        except NoSuchTableError:
            raise not_found_table(ns, name) from None
        return 204, None

    def rename_table(self, body: Any) -> tuple[int, Any]:
        try:
            src, dst = body["source"], body["destination"]
            src_ns, dst_ns = tuple(src["namespace"]), tuple(dst["namespace"])
            src_name, dst_name = str(src["name"]), str(dst["name"])
        except (TypeError, KeyError):
            raise HttpError(400, "BadRequestException", "source and destination are required") from None
        with self.lock:
            self.require_namespace(src_ns)
            self.require_namespace(dst_ns)
            try:
                self.catalog.rename_table(src_ns + (src_name,), dst_ns + (dst_name,))
            except NoSuchTableError:
                raise not_found_table(src_ns, src_name) from None
            except TableAlreadyExistsError as e:
                raise HttpError(409, "AlreadyExistsException", str(e)) from None
        return 204, None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "sluice-rest-catalog/1"
    service: RestCatalogService  # set on the subclass made in main()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        sys.stderr.write(f"[rest_catalog] {self.address_string()} {format % args}\n")
        sys.stderr.flush()

    def read_body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def send(self, status: int, payload: Any, head: bool = False) -> None:
        self.send_response(status)
        if status == 204:
            self.end_headers()
            return
        data = b"" if payload is None else json.dumps(payload).encode("utf-8")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "0" if head else str(len(data)))
        self.end_headers()
        if not head and data:
            self.wfile.write(data)

    def dispatch(self, method: str) -> None:
        head = method == "HEAD"
        try:
            raw = self.read_body()
            url = urlsplit(self.path)
            # Split before decoding so that an encoded "/" stays inside its segment.
            segs = [unquote(s) for s in url.path.split("/") if s]
            query = parse_qs(url.query, keep_blank_values=True)
            body: Any = None
            if raw.strip():
                try:
                    body = json.loads(raw)
                except (json.JSONDecodeError, UnicodeDecodeError) as e:
                    if "x-www-form-urlencoded" not in (self.headers.get("Content-Type") or ""):
                        raise HttpError(400, "BadRequestException", f"Malformed JSON body: {e}") from None
                    body = parse_qs(raw.decode("utf-8", "replace"))  # the OAuth token request
            status, payload = self.service.handle(method, segs, query, body, self.headers.get("Authorization"))
            self.send(status, payload, head)
        except HttpError as e:
            self.log_message("%s", f"-> {e.code} {e.kind}: {e.message}")
            self.send(e.code, {"error": {"message": e.message, "type": e.kind, "code": e.code}}, head)
        except (pydantic.ValidationError, IcebergValidationError, ValueError, TypeError, KeyError) as e:
            self.log_message("%s", f"-> 400: {type(e).__name__}: {e}")
            self.send(400, {"error": {"message": f"{type(e).__name__}: {e}", "type": "BadRequestException", "code": 400}}, head)
        except Exception as e:  # noqa: BLE001
            traceback.print_exc(file=sys.stderr)
            self.send(
                500,
                {"error": {"message": f"{type(e).__name__}: {e}", "type": "ServiceFailureException", "code": 500,
                           "stack": traceback.format_exc().splitlines()}},
                head,
            )

    def do_GET(self) -> None:  # noqa: N802
        self.dispatch("GET")

    def do_HEAD(self) -> None:  # noqa: N802
        self.dispatch("HEAD")

    def do_POST(self) -> None:  # noqa: N802
        self.dispatch("POST")

    def do_DELETE(self) -> None:  # noqa: N802
        self.dispatch("DELETE")

    def do_PUT(self) -> None:  # noqa: N802
        self.dispatch("PUT")


def main() -> None:
    parser = argparse.ArgumentParser(description="Iceberg REST catalog backed by pyiceberg's SqlCatalog on SQLite")
    parser.add_argument("--port", type=int, required=True, help="port on 127.0.0.1 (0 picks a free one)")
    parser.add_argument("--warehouse", required=True, help="absolute directory for tables (file:// also accepted)")
    parser.add_argument("--catalog-db", help="SQLite file (default: <warehouse>/rest-catalog.db)")
    parser.add_argument("--catalog-name", default=DEFAULT_CATALOG_NAME,
                        help=f"the SqlCatalog name, i.e. the catalog_name column (default: {DEFAULT_CATALOG_NAME})")
    parser.add_argument("--tls-cert", help="serve https with this certificate (PEM)")
    parser.add_argument("--tls-key", help="the certificate's private key (PEM)")
    parser.add_argument("--token", help="a static bearer token that every request must carry")
    parser.add_argument("--client", help="ID:SECRET, the OAuth2 client credentials the token endpoint accepts")
    parser.add_argument("--keep-schema-ids", action="store_true",
                        help="keep the schema ids clients send (pyiceberg's metadata update as it is), "
                        "instead of assigning them as Java does")
    args = parser.parse_args()

    warehouse = args.warehouse[len("file://"):] if args.warehouse.startswith("file://") else args.warehouse
    if not os.path.isabs(warehouse):
        parser.error("--warehouse must be an absolute path")
    warehouse = os.path.normpath(warehouse)
    os.makedirs(warehouse, exist_ok=True)
    db = args.catalog_db or os.path.join(warehouse, "rest-catalog.db")
    if not os.path.isabs(db):
        parser.error("--catalog-db must be an absolute path")
    os.makedirs(os.path.dirname(db), exist_ok=True)

    catalog = SqlCatalog(args.catalog_name, uri=f"sqlite:///{db}", warehouse=f"file://{warehouse}")
    service = RestCatalogService(
        catalog, token=args.token, client=args.client, keep_schema_ids=args.keep_schema_ids
    )
    handler = type("BoundHandler", (Handler,), {"service": service})
    server = ThreadingHTTPServer(("127.0.0.1", args.port), handler)
    server.daemon_threads = True
    scheme = "http"
    if args.tls_cert:
        import ssl

        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.tls_cert, args.tls_key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        scheme = "https"

    def stop(signum: int, _frame: Any) -> None:
        # shutdown() waits for serve_forever(), so it must run on another thread.
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    port = server.server_address[1]
    sys.stderr.write(f"[rest_catalog] catalog {args.catalog_name!r}, db {db}, warehouse file://{warehouse}\n")
    host = "localhost" if scheme == "https" else "127.0.0.1"
    print(f"listening on {scheme}://{host}:{port}", flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()
        catalog.engine.dispose()


if __name__ == "__main__":
    main()
