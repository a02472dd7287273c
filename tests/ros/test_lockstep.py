"""The safety node's sim-time lockstep (robot_rl.ros.plumbing.lockstep), without ROS: which instants it ticks, when, how many
ticks each, and which command it obeys from each on."""

from robot_rl.ros.plumbing.lockstep import MAX_SIM_TICKS, Lockstep

MS = 1_000_000  # ns


def ticked(lockstep: Lockstep, measured_ns: int) -> list[tuple[int, int, str | None]]:
    return [(i.ns // MS, i.ticks, i.command) for i in lockstep.due(measured_ns)]


def test_a_command_is_ticked_once_the_arm_state_of_its_instant_is_in_then_the_states_of_its_period():
    lockstep = Lockstep(rate_hz=500, control_period=0.1)
    lockstep.queue(100 * MS, "a")
    assert ticked(lockstep, 99 * MS) == []  # the arm state of the command's instant is not in yet
    assert ticked(lockstep, 100 * MS) == [(100, 1, "a")]  # the first instant: one tick
    lockstep.add_arm_state(110 * MS)  # inside the command's period: an instant with the ticks of 10 ms at 500 Hz
    assert ticked(lockstep, 110 * MS) == [(110, 5, None)]
    lockstep.add_arm_state(200 * MS)  # the period's end is the next observation: ticked on the next command
    assert ticked(lockstep, 200 * MS) == []
    lockstep.queue(200 * MS, "b")
    assert ticked(lockstep, 200 * MS) == [(200, 45, "b")]


def test_an_early_command_waits_for_its_instant_and_the_one_before_holds_until_then():
    lockstep = Lockstep(rate_hz=100, control_period=0.1)
    lockstep.queue(50 * MS, "first")
    assert ticked(lockstep, 50 * MS) == [(50, 1, "first")]
    lockstep.queue(300 * MS, "after the pause")  # a reset's pause: the command for 300 ms comes at once
    assert lockstep.add_clock(150 * MS)
    assert ticked(lockstep, 150 * MS) == [(150, 10, None)]  # the clock's instant, on the command before
    assert ticked(lockstep, 300 * MS) == [(300, 15, "after the pause")]


def test_the_clock_standing_adds_nothing_and_a_same_instant_is_ticked_once():
    lockstep = Lockstep(rate_hz=500, control_period=0.1)
    assert lockstep.add_clock(100 * MS)
    assert not lockstep.add_clock(100 * MS)  # the sim robot asks again: the node sends its answer again
    lockstep.queue(100 * MS + 500, "a")  # the command's float-seconds stamp, within the tolerance: one instant
    assert ticked(lockstep, 100 * MS + 500) == [(100, 1, "a")]
    lockstep.add_instant(100 * MS)  # ticked already
    assert ticked(lockstep, 200 * MS) == []


def test_a_long_jump_of_the_clock_is_capped():
    lockstep = Lockstep(rate_hz=1000, control_period=0.1)
    lockstep.queue(MS, "a")
    assert ticked(lockstep, MS) == [(1, 1, "a")]
    lockstep.add_clock(10_000 * MS)  # 10 s later (a long reset)
    assert ticked(lockstep, 10_000 * MS) == [(10_000, MAX_SIM_TICKS, None)]


def test_tick_times_end_at_the_instant_one_rate_period_apart():
    lockstep = Lockstep(rate_hz=500, control_period=0.1)
    lockstep.queue(100 * MS, "a")
    list(lockstep.due(100 * MS))
    lockstep.add_arm_state(104 * MS)
    (instant,) = list(lockstep.due(104 * MS))
    assert [round(t, 6) for t in instant.tick_times(500)] == [0.102, 0.104]
