"""SPEC 6 and 9: the web's maintenance controller samples the panel's health and
moves the switch — never an operator's, never twice across replicas."""

from models.ops import AuditEvent, MaintenanceState
from ops import maintenance
from ops.maintenance_controller import ACTOR, MaintenanceController
from tests.fulfillment.conftest import PANEL_TOKEN


def controller(panel_server, **options):
    from integrations.remnawave import RemnawaveClient

    return MaintenanceController(RemnawaveClient(panel_server.base_url, PANEL_TOKEN), **options)


def state():
    return MaintenanceState.get_by_id(maintenance.MAINTENANCE_ROW)


def audits():
    return [(a.action, a.actor) for a in AuditEvent.select().order_by(AuditEvent.id)]


def test_a_panel_failing_three_probes_in_a_row_turns_maintenance_on_and_recovery_turns_it_off(panel):
    probe = controller(panel)
    panel.set_faults(fail_rate=1.0, routes=["GET /api/system/health"])
    assert [probe.probe_once() for _ in range(3)] == [None, None, "enabled"]
    assert state().active and state().set_by == ACTOR and "3 health probes" in state().reason
    panel.clear_faults()
    assert [probe.probe_once() for _ in range(2)] == [None, "disabled"]
    assert not state().active
    assert audits() == [("maintenance.enabled", ACTOR), ("maintenance.disabled", ACTOR)]


def test_one_healthy_probe_between_failures_starts_the_count_again(panel):
    probe = controller(panel)
    panel.set_faults(fail_rate=1.0, routes=["GET /api/system/health"])
    probe.probe_once(), probe.probe_once()
    panel.clear_faults()
    probe.probe_once()
    panel.set_faults(fail_rate=1.0, routes=["GET /api/system/health"])
    assert [probe.probe_once() for _ in range(2)] == [None, None]
    assert not state().active


def test_the_controller_never_turns_off_what_an_operator_turned_on(panel):
    maintenance.set_mode(True, "panel upgrade tonight", actor="operator:alice")
    probe = controller(panel)
    assert [probe.probe_once() for _ in range(5)] == [None] * 5
    assert state().active and state().set_by == "operator:alice"


def test_two_replicas_probing_the_same_outage_write_one_change(panel):
    first, second = controller(panel), controller(panel)
    panel.set_faults(fail_rate=1.0, routes=["GET /api/system/health"])
    outcomes = []
    for _ in range(3):
        outcomes += [first.probe_once(), second.probe_once()]
    assert outcomes.count("enabled") == 1
    assert audits() == [("maintenance.enabled", ACTOR)]


def test_a_panel_that_does_not_answer_at_all_counts_as_down(panel):
    from integrations.remnawave import RemnawaveClient

    probe = MaintenanceController(RemnawaveClient("http://127.0.0.1:9", PANEL_TOKEN))  # nothing listens there
    assert [probe.probe_once() for _ in range(3)][-1] == "enabled"
