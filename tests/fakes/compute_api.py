"""A loopback stand-in for the Compute Engine API (v1), enough for the real ``gcloud`` CLI to run the commands
``download --backend gcloud`` uses against it: instances get, insert, start, stop and getGuestAttributes, the
project, image families and zone operations (always done). Requests are recorded as (method, path, body)."""

from __future__ import annotations

import base64
import json
import re
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlparse

from fakes.loopback import LoopbackServer, send_json


class ComputeApi(LoopbackServer):
    def __init__(self):
        self.instances: dict[str, dict] = {}
        self.guest: dict[str, str] = {}  # "namespace/key" -> value, for every instance
        self.requests: list[tuple[str, str, dict | None]] = []
        self.metadata: dict = {"kind": "compute#metadata", "fingerprint": "AAAAAAAAAAA=", "items": []}
        self.on_insert = None  # called with an inserted instance (as the VM boots: its startup script)
        self.on_ssh_keys = None  # called with the project's "ssh-keys" metadata (as the VM's guest agent)
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                self._handle(None)

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n) if n else b""
                self._handle(json.loads(raw) if raw.strip() else {})

            def _handle(self, body):
                url = urlparse(self.path)
                api.requests.append((self.command, url.path, body))
                code, obj = api.answer(self.command, url.path, parse_qs(url.query), body, self.server.base)
                send_json(self, code, obj)

        super().__init__(Handler)
        self.base = self.httpd.base = f"{self.url}/compute/v1/"

    @staticmethod
    def _missing(what: str) -> tuple[int, dict]:
        message = f"The resource '{what}' was not found"
        return 404, {"error": {"code": 404, "message": message, "errors": [{"reason": "notFound", "message": message}]}}

    def _operation(self, base: str, project: str, zone: str | None, target: str, kind: str) -> tuple[int, dict]:
        name = f"operation-{len(self.requests)}"
        scope = f"zones/{zone}" if zone else "global"
        operation = {
            "kind": "compute#operation",
            "name": name,
            "operationType": kind,
            "status": "DONE",
            "progress": 100,
            "targetLink": target,
            "selfLink": f"{base}projects/{project}/{scope}/operations/{name}",
        }
        return 200, {**operation, "zone": f"{base}projects/{project}/zones/{zone}"} if zone else operation

    def answer(self, method: str, path: str, query: dict, body: dict | None, base: str) -> tuple[int, dict]:
        rest = path.removeprefix("/compute/v1/")
        m = re.fullmatch(r"projects/([^/]+)/zones/([^/]+)/(instances|operations)(?:/([^/]+))?(?:/([^/]+))?", rest)
        if re.fullmatch(r"projects/[^/]+", rest):
            name = rest.split("/")[1]
            return 200, {"kind": "compute#project", "name": name, "id": "99", "commonInstanceMetadata": self.metadata}
        if re.fullmatch(r"projects/[^/]+/setCommonInstanceMetadata", rest):
            self.metadata = {**body, "fingerprint": base64.b64encode(str(len(self.requests)).encode()).decode()}
            keys = [i["value"] for i in body.get("items", []) if i["key"] == "ssh-keys"]
            if self.on_ssh_keys and keys:
                self.on_ssh_keys(keys[0])
            return self._operation(
                base, rest.split("/")[1], None, f"{base}projects/{rest.split('/')[1]}", "setMetadata"
            )
        if re.fullmatch(r"projects/[^/]+/global/operations/[^/]+(/wait)?", rest):
            return self._operation(base, rest.split("/")[1], None, "", "wait")
        if re.fullmatch(r"projects/[^/]+/global/images/family/[^/]+", rest):
            project, family = rest.split("/")[1], rest.split("/")[-1]
            link = f"{base}projects/{project}/global/images/{family}-v20261201"
            return 200, {"kind": "compute#image", "name": f"{family}-v20261201", "family": family, "selfLink": link}
        if not m:
            return self._missing(rest)
        project, zone, collection, name, action = m.groups()
        if collection == "operations":
            return self._operation(base, project, zone, "", "wait")
        link = f"{base}projects/{project}/zones/{zone}/instances/{name or (body or {}).get('name')}"
        if method == "POST" and name is None:  # insert
            self.instances[body["name"]] = {**body, "id": str(4242 + len(self.instances)), "status": "RUNNING"}
            if self.on_insert:
                self.on_insert(self.instances[body["name"]])
            return self._operation(base, project, zone, link, "insert")
        vm = self.instances.get(name)
        if vm is None:
            return self._missing(f"projects/{project}/zones/{zone}/instances/{name}")
        if action is None:
            return 200, {
                "kind": "compute#instance",
                "selfLink": link,
                "zone": f"{base}projects/{project}/zones/{zone}",
                **vm,
                "networkInterfaces": [
                    {"name": "nic0", "accessConfigs": [{"natIP": "127.0.0.1", "type": "ONE_TO_ONE_NAT"}]}
                ],
            }
        if action in ("start", "stop", "resume"):
            vm["status"] = "TERMINATED" if action == "stop" else "RUNNING"
            return self._operation(base, project, zone, link, action)
        if action == "getGuestAttributes":
            path_ = query.get("queryPath", [""])[0]
            items = [
                {"namespace": k.split("/")[0], "key": k.split("/")[1], "value": v}
                for k, v in sorted(self.guest.items())
                if k.startswith(path_)
            ]
            if not items and not path_.endswith("/"):  # a missing key is not found; a namespace may be empty
                return self._missing(f"projects/{project}/zones/{zone}/instances/{name}/guestAttributes/{path_}")
            return 200, {"kind": "compute#guestAttributes", "queryPath": path_, "queryValue": {"items": items}}
        return self._missing(rest)
