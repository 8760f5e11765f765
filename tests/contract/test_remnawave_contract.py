"""SPEC 2.22: every request the adapter sends passes the official Remnawave contract's own zod schemas.

The adapter runs against the fake panel through a recording HTTP session, for
every operation and plan shape; tests/contract/validate.mjs then checks each
recorded route, path parameter and body with `@remnawave/backend-contract`
(the exact version pinned in package.json / package-lock.json here), and the
fake panel's answers with the contract's ResponseSchema. A last test proves
the validator can fail, and that the fake panel refuses what the contract does.
"""

import datetime
import json
import shutil
import subprocess
import uuid
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
import requests
import requests.adapters

from fakes.remnawave import FakeRemnawave
from integrations.remnawave import (
    CONTRACT_VERSION,
    ROUTE_CREATE,
    ROUTE_DELETE,
    ROUTE_DISABLE,
    ROUTE_ENABLE,
    ROUTE_GET_BY_ID,
    ROUTE_GET_BY_USERNAME,
    ROUTE_HEALTH,
    ROUTE_RESET_TRAFFIC,
    ROUTE_UPDATE,
    RemnawaveClient,
)

HERE = Path(__file__).resolve().parent
TOKEN = "contract-panel-token-31f6a2"
GIB = 2**30

# Route template → the contract command that owns it.
COMMANDS = {
    ROUTE_CREATE: "CreateUserCommand",
    ROUTE_UPDATE: "UpdateUserCommand",
    ROUTE_GET_BY_USERNAME: "GetUserByUsernameCommand",
    ROUTE_GET_BY_ID: "GetUserByIdCommand",
    ROUTE_ENABLE: "EnableUserCommand",
    ROUTE_DISABLE: "DisableUserCommand",
    ROUTE_RESET_TRAFFIC: "ResetUserTrafficCommand",
    ROUTE_DELETE: "DeleteUserCommand",
    ROUTE_HEALTH: "GetRemnawaveHealthCommand",
}
WITH_BODY = (ROUTE_CREATE, ROUTE_UPDATE)

PLANS = {
    "unlimited-no-squads": {"traffic_limit_bytes": 0, "hwid_device_limit": None, "squad_uuids": []},
    "limited-one-squad": {"traffic_limit_bytes": 100 * GIB, "hwid_device_limit": 3, "squad_uuids": [str(uuid.uuid4())]},
    "unlimited-several-squads": {
        "traffic_limit_bytes": 0,
        "hwid_device_limit": None,
        "squad_uuids": [str(uuid.uuid4()) for _ in range(3)],
    },
    "device-limit-only": {"traffic_limit_bytes": 0, "hwid_device_limit": 1, "squad_uuids": []},
    "traffic-limit-only": {"traffic_limit_bytes": 5 * GIB, "hwid_device_limit": None, "squad_uuids": []},
}


@pytest.fixture(scope="module")
def contract():
    """Run checks through validate.mjs; `npm ci` first if scripts/test.sh did not."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed (scripts/test.sh installs it)")
    if not (HERE / "node_modules" / "@remnawave" / "backend-contract").exists():
        npm = shutil.which("npm")
        if npm is None:
            pytest.skip("npm is not installed (scripts/test.sh installs it)")
        subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=HERE, check=True, capture_output=True
        )

    def run(items):
        result = subprocess.run(
            [node, str(HERE / "validate.mjs")],
            input=json.dumps(items),
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        answer = json.loads(result.stdout)
        assert answer["contractVersion"] == CONTRACT_VERSION
        return answer["results"]

    return run


class RecordingAdapter(requests.adapters.HTTPAdapter):
    """What the adapter sends and what the panel answers, call by call (at the transport)."""

    def __init__(self, exchanges):
        super().__init__()
        self.exchanges = exchanges

    def send(self, request, **kwargs):
        response = super().send(request, **kwargs)
        content = response.content  # the adapter then reads the same bytes
        self.exchanges.append(
            {
                "method": request.method,
                "path": urlsplit(request.url).path,
                "body": json.loads(request.body) if request.body else None,
                "status": response.status_code,
                "answer": json.loads(content) if content else None,
            }
        )
        return response


class RecordingSession(requests.Session):
    def __init__(self):
        super().__init__()
        self.exchanges = []
        self.mount("http://", RecordingAdapter(self.exchanges))


def template_of(method, path):
    """The route template of a recorded call, and the path arguments the contract's url() takes."""
    parts = path.strip("/").split("/")
    if method == "GET" and path == "/api/system/health":
        return ROUTE_HEALTH, []
    if path == "/api/users":
        return {"POST": ROUTE_CREATE, "PATCH": ROUTE_UPDATE}[method], []
    if parts[:3] == ["api", "users", "by-username"]:
        return ROUTE_GET_BY_USERNAME, [unquote(parts[3])]
    if len(parts) == 5 and parts[3] == "actions":
        return {"enable": ROUTE_ENABLE, "disable": ROUTE_DISABLE, "reset-traffic": ROUTE_RESET_TRAFFIC}[parts[4]], [
            parts[2]
        ]
    return {"GET": ROUTE_GET_BY_ID, "DELETE": ROUTE_DELETE}[method], [parts[2]]


def later(days):
    return datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=days)


@pytest.fixture(scope="module")
def recorded():
    """Every operation, for every plan shape, sent by the real adapter to the fake panel."""
    session = RecordingSession()
    with FakeRemnawave(token=TOKEN) as panel:
        client = RemnawaveClient(panel.base_url, TOKEN, session=session)
        client.healthy()
        for index, (name, plan) in enumerate(PLANS.items()):
            username = f"omniflow_{index:016x}"
            assert client.get_user_by_username(username) is None  # the 404 the worker looks up first
            user = client.create_user(username, later(30), **plan)
            client.get_user(user.id)
            for other in PLANS.values():  # moving between every pair of plan shapes
                client.update_user(user.id, later(60), **other)
            client.update_user(user.id, later(90), **plan, status="DISABLED")
            client.update_user(user.id, later(90), **plan, status="ACTIVE")
            client.update_user(user.id, None, **plan)
            client.disable_user(user.id)
            client.disable_user(user.id)  # A029, then a read
            client.enable_user(user.id)
            client.enable_user(user.id)  # A030, then a read
            client.reset_traffic(user.id)
            client.delete_user(user.id)
    return session.exchanges


def test_every_operation_was_recorded(recorded):
    templates = {template_of(exchange["method"], exchange["path"])[0] for exchange in recorded}
    assert templates == set(COMMANDS)


def test_every_route_method_and_path_is_the_contracts(recorded, contract):
    checks = []
    for exchange in recorded:
        template, args = template_of(exchange["method"], exchange["path"])
        checks.append(
            {
                "command": COMMANDS[template],
                "kind": "route",
                "method": exchange["method"],
                "path": exchange["path"],
                "args": args,
            }
        )
    failures = [result for result in contract(checks) if not result["ok"]]
    assert failures == []


def test_every_request_body_passes_the_contract(recorded, contract):
    checks = []
    for exchange in recorded:
        template, args = template_of(exchange["method"], exchange["path"])
        if template in WITH_BODY:
            checks.append({"command": COMMANDS[template], "kind": "request", "body": exchange["body"]})
        else:
            assert exchange["body"] is None  # bodiless calls send no body at all
            if args:
                name = "username" if template == ROUTE_GET_BY_USERNAME else "userId"
                checks.append({"command": COMMANDS[template], "kind": "params", "body": {name: args[0]}})
    results = contract(checks)
    assert len(results) > 2 * len(PLANS) * len(PLANS)
    assert [result for result in results if not result["ok"]] == []


def test_unlimited_create_and_unlimited_update_pass_the_contract(recorded, contract):
    # Unlimited is 0 for both limits (SPEC 2.5): a null device limit is the panel's fallback limit.
    writes = [e["body"] for e in recorded if e["path"] == "/api/users" and e["method"] in ("POST", "PATCH")]
    assert all(body["hwidDeviceLimit"] is not None for body in writes)
    create = next(
        e["body"]
        for e in recorded
        if e["method"] == "POST" and e["path"] == "/api/users" and e["body"]["hwidDeviceLimit"] == 0
    )
    update = next(
        e["body"]
        for e in recorded
        if e["method"] == "PATCH" and e["body"]["hwidDeviceLimit"] == 0 and e["body"]["trafficLimitBytes"] == 0
    )
    assert create["trafficLimitBytes"] == 0
    results = contract(
        [
            {"command": "CreateUserCommand", "kind": "request", "body": create},
            {"command": "UpdateUserCommand", "kind": "request", "body": update},
        ]
    )
    assert [result["ok"] for result in results] == [True, True], results


def test_the_fake_panels_answers_pass_the_contracts_response_schema(recorded, contract):
    checks = []
    for exchange in recorded:
        template, _ = template_of(exchange["method"], exchange["path"])
        if 200 <= exchange["status"] < 300 and template != ROUTE_DELETE:
            checks.append({"command": COMMANDS[template], "kind": "response", "body": exchange["answer"]})
    results = contract(checks)
    assert len(results) > len(PLANS) * 10
    assert [result for result in results if not result["ok"]] == []


def test_the_contract_has_no_response_schema_for_delete(recorded, contract):
    # DELETE /api/users/{id} answers nothing the contract describes; the
    # adapter reads only its status (the fake answers {"response": {"isDeleted": true}}).
    deletes = [e for e in recorded if e["method"] == "DELETE"]
    assert deletes and all(e["status"] == 200 for e in deletes)
    (result,) = contract([{"command": "DeleteUserCommand", "kind": "response", "body": deletes[0]["answer"]}])
    assert not result["ok"] and "no ResponseSchema" in result["error"]


CREATE_OK = {"username": "omniflow_contract", "expireAt": "2031-01-01T00:00:00.000Z"}
# Bodies the contract and the fake panel must judge alike (True = accepted).
VERDICTS = [
    ("CreateUserCommand", CREATE_OK, True),
    ("CreateUserCommand", {**CREATE_OK, "hwidDeviceLimit": None}, False),  # null refused on create
    ("CreateUserCommand", {**CREATE_OK, "hwidDeviceLimit": 0}, True),
    ("CreateUserCommand", {**CREATE_OK, "trafficLimitBytes": -1}, False),
    ("CreateUserCommand", {**CREATE_OK, "username": "no"}, False),
    ("CreateUserCommand", {**CREATE_OK, "username": "a" * 36}, True),
    ("CreateUserCommand", {**CREATE_OK, "username": "a" * 37}, False),
    ("CreateUserCommand", {**CREATE_OK, "username": "bad.name"}, False),
    ("CreateUserCommand", {"username": "omniflow_contract"}, False),  # expireAt required
    ("CreateUserCommand", {**CREATE_OK, "expireAt": "2031-01-01T03:00:00+03:00"}, True),
    ("CreateUserCommand", {**CREATE_OK, "expireAt": "2031-01-01"}, False),
    ("CreateUserCommand", {**CREATE_OK, "activeInternalSquads": ["11111111-1111-1111-1111-111111111111"]}, False),
    ("CreateUserCommand", {**CREATE_OK, "activeInternalSquads": []}, True),
    ("CreateUserCommand", {**CREATE_OK, "status": "DISABLED"}, True),
    ("UpdateUserCommand", {"id": 1, "hwidDeviceLimit": None, "trafficLimitBytes": 0}, True),
    ("UpdateUserCommand", {"id": 1, "status": "LIMITED"}, False),
    ("UpdateUserCommand", {"id": 1, "status": "DISABLED"}, True),
    ("UpdateUserCommand", {"id": 1, "expireAt": "2001-01-01T00:00:00.000Z"}, False),  # not in the past
    ("UpdateUserCommand", {"trafficLimitBytes": 0}, False),  # neither id nor username
    ("UpdateUserCommand", {"username": "omniflow_contract", "trafficLimitBytes": 0}, True),
    ("UpdateUserCommand", {"id": 1, "hwidDeviceLimit": 2.5}, False),
]


def test_the_validator_can_fail_a_create_with_null_device_limit(contract):
    (result,) = contract(
        [{"command": "CreateUserCommand", "kind": "request", "body": {**CREATE_OK, "hwidDeviceLimit": None}}]
    )
    assert not result["ok"]
    assert [issue["path"] for issue in result["issues"]] == [["hwidDeviceLimit"]]


def test_the_fake_panel_judges_bodies_as_the_contract_does(contract):
    checks = [{"command": command, "kind": "request", "body": body} for command, body, _ in VERDICTS]
    contract_verdicts = [result["ok"] for result in contract(checks)]
    assert contract_verdicts == [expected for _, _, expected in VERDICTS]

    headers = {"Authorization": f"Bearer {TOKEN}", "x-forwarded-for": "127.0.0.1", "x-forwarded-proto": "https"}
    panel_verdicts = []
    with FakeRemnawave(token=TOKEN) as panel:
        for command, body, _ in VERDICTS:
            panel.reset()
            panel.seed_user("omniflow_contract", later(10))  # id 1, for the updates
            if command == "CreateUserCommand":
                panel.delete_user("omniflow_contract")
                answer = requests.post(panel.base_url + "/api/users", json=body, headers=headers, timeout=5)
            else:
                answer = requests.patch(panel.base_url + "/api/users", json=body, headers=headers, timeout=5)
            panel_verdicts.append(answer.status_code < 300)
    assert panel_verdicts == contract_verdicts
