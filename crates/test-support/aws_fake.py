"""Amazon Bedrock, STS and a GitHub Actions OIDC endpoint as the real ones check requests.

Started by tests/suite/clouds.rs with one argument, a JSON config file:
  region, keys ({access key id: [secret, session token or null]}), replies (Messages API
  answers, in order), log (a file: one JSON line per request), and optionally sts
  ({role_arn, web_token, issue: [id, secret, token]}) and oidc ({request_token, token}).
Prints the port it listens on, then serves until killed.

Bedrock's invoke is checked as AWS checks it: the Authorization header's scope (key id,
date, region, service `bedrock`), the session token, the clock skew, and the signature
itself, recomputed by botocore's SigV4Auth over the headers the request says it signed.
A mismatch gets AWS's 403 InvalidSignatureException.
"""

import datetime
import json
import re
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

CONFIG = json.load(open(sys.argv[1]))
LOCK = threading.Lock()
KEYS = {key: tuple(value) for key, value in CONFIG["keys"].items()}
REPLIES = list(CONFIG["replies"])

AUTH = re.compile(
    r"^AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request, "
    r"SignedHeaders=([a-z0-9;-]+), Signature=([0-9a-f]{64})$"
)


def log(entry):
    with LOCK:
        with open(CONFIG["log"], "a") as out:
            out.write(json.dumps(entry) + "\n")


def check_signature(handler, body):
    """None when the request is signed as AWS requires, else (status, error type, message)."""
    header = handler.headers.get("Authorization", "")
    match = AUTH.match(header)
    if not match:
        return (403, "MissingAuthenticationTokenException", "Missing Authentication Token")
    key_id, date, region, service, signed, signature = match.groups()
    if key_id not in KEYS:
        return (403, "UnrecognizedClientException", "The security token included in the request is invalid.")
    secret, token = KEYS[key_id]
    if region != CONFIG["region"] or service != "bedrock":
        return (403, "InvalidSignatureException", f"Credential should be scoped to a valid region and service bedrock, not {region}/{service}.")
    if token is not None and handler.headers.get("X-Amz-Security-Token") != token:
        return (403, "UnrecognizedClientException", "The security token included in the request is invalid.")
    amz_date = handler.headers.get("X-Amz-Date", "")
    try:
        when = datetime.datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(tzinfo=datetime.timezone.utc)
    except ValueError:
        return (403, "IncompleteSignatureException", "X-Amz-Date is missing or malformed.")
    if amz_date[:8] != date:
        return (403, "InvalidSignatureException", "Date in Credential scope does not match X-Amz-Date.")
    if abs((datetime.datetime.now(datetime.timezone.utc) - when).total_seconds()) > 300:
        return (403, "InvalidSignatureException", "Signature expired.")
    names = signed.split(";")
    if "host" not in names or "x-amz-date" not in names:
        return (403, "InvalidSignatureException", "host and x-amz-date must be signed.")
    headers = {}
    for name in names:
        value = handler.headers.get(name)
        if value is None:
            return (403, "InvalidSignatureException", f"signed header {name} is missing.")
        headers[name] = value
    host = handler.headers.get("Host")
    request = AWSRequest(method=handler.command, url=f"http://{host}{handler.path}", data=body, headers=headers)
    request.context["timestamp"] = amz_date
    signer = SigV4Auth(Credentials(key_id, secret, token), service, region)
    canonical = signer.canonical_request(request)
    expected = signer.signature(signer.string_to_sign(request, canonical), request)
    if expected != signature:
        return (403, "InvalidSignatureException", "The request signature we calculated does not match the signature you provided.")
    return None


def sts_xml(issue):
    key_id, secret, token = issue
    expires = (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return (
        '<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">'
        "<AssumeRoleWithWebIdentityResult><Credentials>"
        f"<AccessKeyId>{key_id}</AccessKeyId><SecretAccessKey>{secret}</SecretAccessKey>"
        f"<SessionToken>{token}</SessionToken><Expiration>{expires}</Expiration>"
        "</Credentials></AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>"
    )


def sts_error(code, message):
    return f"<ErrorResponse><Error><Type>Sender</Type><Code>{code}</Code><Message>{message}</Message></Error></ErrorResponse>"


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def reply(self, status, content_type, body, headers=()):
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        oidc = CONFIG.get("oidc")
        entry = {"kind": "oidc", "path": url.path, "query": {k: v[0] for k, v in query.items()}}
        if oidc is None or url.path != "/oidc":
            log(entry)
            return self.reply(404, "application/json", "{}")
        if self.headers.get("Authorization") != f"Bearer {oidc['request_token']}":
            entry["refused"] = "bad request token"
            log(entry)
            return self.reply(401, "application/json", '{"message": "Bad credentials"}')
        log(entry)
        audience = query.get("audience", [""])[0]
        return self.reply(200, "application/json", json.dumps({"value": f"{oidc['token']}.{audience}"}))

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        path = urllib.parse.urlsplit(self.path).path
        if path == "/" and CONFIG.get("sts"):
            return self.sts(body)
        entry = {"kind": "bedrock", "path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}}
        try:
            entry["body"] = json.loads(body)
        except ValueError:
            entry["body"] = None
        problem = check_signature(self, body)
        if problem is None and not re.fullmatch(r"/model/[^/]+/invoke", path):
            problem = (404, "UnknownOperationException", f"no operation at {path}")
        if problem is not None:
            status, kind, message = problem
            entry["refused"] = kind
            log(entry)
            return self.reply(status, "application/json", json.dumps({"message": message}), [("x-amzn-ErrorType", kind)])
        payload = entry["body"] or {}
        if payload.get("anthropic_version") != "bedrock-2023-05-31" or "model" in payload or "stream" in payload:
            entry["refused"] = "ValidationException"
            log(entry)
            return self.reply(400, "application/json", json.dumps({"message": "Malformed input request: anthropic_version bedrock-2023-05-31 is required; model and stream are not permitted"}), [("x-amzn-ErrorType", "ValidationException")])
        with LOCK:
            reply = REPLIES.pop(0) if REPLIES else None
        log(entry)
        if reply is None:
            return self.reply(400, "application/json", '{"message": "no scripted reply left"}')
        return self.reply(200, "application/json", json.dumps(reply))

    def sts(self, body):
        form = {k: v[0] for k, v in urllib.parse.parse_qs(body.decode()).items()}
        sts = CONFIG["sts"]
        log({"kind": "sts", "form": form})
        if form.get("Action") != "AssumeRoleWithWebIdentity" or form.get("Version") != "2011-06-15":
            return self.reply(400, "text/xml", sts_error("InvalidAction", "unknown action"))
        if form.get("RoleArn") != sts["role_arn"]:
            return self.reply(403, "text/xml", sts_error("AccessDenied", "Not authorized to perform sts:AssumeRoleWithWebIdentity"))
        if form.get("WebIdentityToken") != sts["web_token"]:
            return self.reply(400, "text/xml", sts_error("InvalidIdentityToken", "The web identity token that was passed could not be validated by AWS."))
        if not form.get("RoleSessionName"):
            return self.reply(400, "text/xml", sts_error("ValidationError", "RoleSessionName is required"))
        key_id, secret, token = sts["issue"]
        with LOCK:
            KEYS[key_id] = (secret, token)
        return self.reply(200, "text/xml", sts_xml(sts["issue"]))


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
