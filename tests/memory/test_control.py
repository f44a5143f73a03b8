"""The run's control block: each flag and counter is a word of its own, the stop and done
flags both end the workers' run, and the evaluations' verdict names the env step judged."""

from __future__ import annotations

from fastrl.memory.control import RunControl


def fresh() -> RunControl:
    return RunControl(memoryview(bytearray(RunControl.nbytes())))


def test_a_fresh_block_is_a_run_not_yet_begun():
    c = fresh()
    assert not c.stop_requested() and not c.run_over() and not c.parked()
    assert c.learner_step() == 0 and c.last_beat() == 0 and c.last_eval_beat() == 0
    assert c.solved_step() is None and c.eval_step() is None


def test_stop_and_done_each_end_the_workers_run():
    stopped, done = fresh(), fresh()
    stopped.request_stop()
    done.mark_done()
    assert stopped.run_over() and stopped.stop_requested()
    assert done.run_over() and not done.stop_requested()


def test_every_word_is_its_own():
    c = fresh()
    c.record_step(2048)
    c.beat(5)
    c.start_eval(0)  # step 0 is a step: told apart from "none yet"
    c.beat_eval(7)
    c.mark_solved(0)
    c.mark_parked()
    assert (c.learner_step(), c.last_beat(), c.eval_step(), c.last_eval_beat(),
            c.solved_step(), c.parked()) == (2048, 5, 0, 7, 0, True)
    assert not c.run_over()
    c.start_eval(4096)  # a new evaluation has not beaten yet
    assert c.eval_step() == 4096 and c.last_eval_beat() == 0


def test_a_population_is_solved_once_every_member_is():
    c = RunControl(memoryview(bytearray(RunControl.nbytes(3))))
    assert c.members == 3
    c.mark_solved(4096, member=2)
    c.mark_solved(1024, member=0)
    assert c.solved_step() is None  # member 1 is not solved yet
    c.mark_solved(8192, member=2)  # solved stays solved at its first step
    c.mark_solved(6144, member=1)
    assert [c.member_solved_step(k) for k in range(3)] == [1024, 6144, 4096]
    assert c.solved_step() == 6144
    c.record_step(7)  # the members' lines are past every other word
    assert c.learner_step() == 7 and c.solved_step() == 6144
