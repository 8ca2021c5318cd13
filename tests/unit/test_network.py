"""Systems, collective algorithms and the network simulator: alpha-beta times on an idle
network, contention on shared links, system files and their errors."""

from __future__ import annotations

import pytest

from monet_ir.network.collectives import idle_time_s, rounds
from monet_ir.network.sim import NetworkSim, Request
from targets import TargetError
from targets.system import build_network, get_system, list_builtin_systems, load_system_file

GB = 1e9


def one(net, kind, algorithm, group, nbytes, node_chips=0):
    sim = NetworkSim(net)
    (res,) = sim.run([Request("c", rounds(kind, algorithm, group, nbytes, node_chips), 0.0)])
    return res.end_s, sim


@pytest.mark.parametrize("topology,n,kw", [("ring", 8, {}), ("switch", 8, {}), ("switch", 64, {}),
                                            ("ring", 5, {}), ("torus2d", 4, {"torus": (2, 2)})])
@pytest.mark.parametrize("nbytes", [1, 4096, 123_456_789])
def test_ring_all_reduce_is_alpha_beta_on_an_idle_network(topology, n, kw, nbytes):
    bw, lat = 50 * GB, 3e-6
    net = build_network(topology, n, bw, lat, 1.0, **kw)
    got, _ = one(net, "all_reduce", "ring", net.ring_order(range(n)), nbytes)
    # every ring message goes to a neighbour: alpha is one chip-to-chip latency
    assert net.latency_s(0, 1) == pytest.approx(lat)
    want = 2 * (n - 1) / n * nbytes / bw + 2 * (n - 1) * lat
    chunk_rounding = 2 * (n - 1) * (-(-nbytes // n) - nbytes / n) / bw  # whole bytes per message
    assert abs(got - want) <= 0.01 * want + chunk_rounding
    assert idle_time_s("all_reduce", "ring", n, nbytes, bw, lat) == pytest.approx(want)


@pytest.mark.parametrize("n", [2, 7, 8, 16])
def test_tree_all_reduce_and_ring_reduce_scatter_all_gather(n):
    bw, lat, nbytes = 100 * GB, 2e-6, 8 * 2**20
    net = build_network("switch", n, bw, lat, 0.0)
    tree, _ = one(net, "all_reduce", "tree", list(range(n)), nbytes)
    assert tree == pytest.approx(idle_time_s("all_reduce", "tree", n, nbytes, bw, lat), rel=1e-9)
    for kind in ("reduce_scatter", "all_gather"):
        t, _ = one(net, kind, "ring", list(range(n)), nbytes)
        assert t == pytest.approx(idle_time_s(kind, "ring", n, nbytes, bw, lat), rel=0.01)


def test_energy_and_bytes_count_every_link_crossed():
    net = build_network("ring", 4, 10 * GB, 1e-6, 2.0)
    _, sim = one(net, "all_reduce", "ring", [0, 1, 2, 3], 4000)
    # 2(N-1) rounds of N messages of B/N bytes, one link each
    assert sim.total_bytes() == 2 * 3 * 4 * 1000
    assert sim.total_energy_pj() == pytest.approx(2 * 3 * 4 * 1000 * 8 * 2.0)


def test_concurrent_collectives_on_shared_links_are_slower():
    net = build_network("ring", 8, 25 * GB, 1e-6, 0.0)
    nbytes = 64 * 2**20
    alone, _ = one(net, "all_reduce", "ring", list(range(8)), nbytes)
    sim = NetworkSim(net)
    both = sim.run([Request(f"c{i}", rounds("all_reduce", "ring", list(range(8)), nbytes), 0.0) for i in range(2)])
    assert max(r.end_s for r in both) > 1.9 * alone
    # two groups on disjoint chips of a switch do not share links: no slowdown
    sw = build_network("switch", 8, 25 * GB, 1e-6, 0.0)
    alone4, _ = one(sw, "all_reduce", "ring", [0, 1, 2, 3], nbytes)
    sim = NetworkSim(sw)
    side = sim.run([Request("a", rounds("all_reduce", "ring", [0, 1, 2, 3], nbytes), 0.0),
                    Request("b", rounds("all_reduce", "ring", [4, 5, 6, 7], nbytes), 0.0)])
    assert max(r.end_s for r in side) == pytest.approx(alone4)


def test_groups_crossing_nodes_contend_for_the_node_uplinks():
    system = get_system("4x8_datacenter")
    net = system.network
    nbytes = 32 * 2**20
    # data-parallel groups with tp=8: chip j of every node, 8 groups side by side
    groups = [[node * 8 + j for node in range(4)] for j in range(8)]
    alone, _ = one(net, "all_reduce", "ring", groups[0], nbytes)
    sim = NetworkSim(net)
    res = sim.run([Request(f"g{j}", rounds("all_reduce", "ring", g, nbytes), 0.0) for j, g in enumerate(groups)])
    assert max(r.end_s for r in res) > 4 * alone
    # the hierarchical algorithm keeps most bytes inside the nodes: faster than a flat ring
    flat, _ = one(net, "all_reduce", "ring", list(range(32)), nbytes)
    hier, _ = one(net, "all_reduce", "hierarchical", list(range(32)), nbytes, node_chips=8)
    assert hier < flat


def test_builtin_systems_load():
    names = list_builtin_systems()
    assert {"8x_tpu_like_quad_core", "8x_datacenter", "4x8_datacenter", "2x2_edge_npu"} <= set(names)
    for name in names:
        system = get_system(name)
        assert system.chips == len({l.src for l in system.network.links if l.src.startswith("chip")})
        for a in range(system.chips):
            for b in range(system.chips):
                route = system.route(a, b)
                if a != b:  # a route is a connected path from a to b
                    links = [system.network.links[i] for i in route]
                    assert links[0].src == f"chip{a}" and links[-1].dst == f"chip{b}"
                    assert all(x.dst == y.src for x, y in zip(links, links[1:]))
    assert get_system("4x8_datacenter").chip.name == "datacenter"


@pytest.mark.parametrize("body,message", [
    ("chip: tpu_like_quad_core\nchips: 4\nnetwork: {topology: hypercube, bandwidth_GBps: 1}\n",
     "network.topology: unknown topology 'hypercube'"),
    ("chip: tpu_like_quad_core\nchips: 6\nnetwork: {topology: torus2d, torus: [2, 2], bandwidth_GBps: 1}\n",
     "network.torus: 2 x 2 is not 6 chips"),
    ("chip: nowhere.yaml\nchips: 2\nnetwork: {topology: ring, bandwidth_GBps: 1}\n", "chip: "),
    ("chip: edge_npu\nchips: 0\nnetwork: {topology: ring, bandwidth_GBps: 1}\n", "chips: "),
    ("chip: edge_npu\nchips: 6\nnetwork: {topology: hierarchical, bandwidth_GBps: 1, node_chips: 4, inter_node: {bandwidth_GBps: 1}}\n",
     "network.node_chips: 6 chips do not divide into nodes of 4"),
    ("chip: edge_npu\nchips: 2\nnetwork: {topology: ring, bandwith_GBps: 1}\n", "network.bandwith_GBps: unknown field"),
])
def test_bad_system_files_name_the_field(tmp_path, body, message):
    path = tmp_path / "sys.yaml"
    path.write_text(body)
    with pytest.raises(TargetError) as info:
        load_system_file(str(path))
    assert any(str(path) in line and message in line for line in info.value.problems), info.value.problems
