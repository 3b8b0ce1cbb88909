// A plugin that loops, eats memory, forks and hangs, or exits mid-call: the call fails with its
// own code, the worker (its whole process group) is replaced, and nothing else is affected.
import t from 'tap'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { call, failure, isGone, makeKind, waitFor, waitGone } from './helpers.js'

async function pidOf (kind: Parameters<typeof call>[0], name: string, ref: string): Promise<number> {
  return Number((await call(kind, name, ref) as { message: string }).message)
}

for (const [name, loop, pid] of [['py-edge', 'verify:loop', 'verify:pid'], ['js-edge', 'verify:loop', 'verify:pid']]) {
  t.test(`${name}: an infinite loop times out, retryable, and the worker is replaced`, async (t) => {
    const kind = await makeKind(t, { workers: 1 })
    const before = await pidOf(kind, name, pid)
    const error = await failure(call(kind, name, loop, {}, '', { timeoutS: 1 }))
    t.equal(error.code, 'ARB_PLUGIN_TIMEOUT')
    t.equal(error.retryable, true)
    t.equal(error.statusCode, 502)
    t.same(error.verifier, { kind: 'plugin', ref: loop })
    t.ok(await waitGone(before), 'the looping worker is gone')
    const after = await pidOf(kind, name, pid)
    t.not(after, before, 'a new worker answers the next call')
  })
}

t.test('python: unbounded allocation hits the memory cap and is a crash', async (t) => {
  const kind = await makeKind(t, { workers: 1, memoryMb: 128 })
  const before = await pidOf(kind, 'py-edge', 'verify:pid')
  const error = await failure(call(kind, 'py-edge', 'verify:allocate', {}, '', { timeoutS: 10 }))
  t.equal(error.code, 'ARB_PLUGIN_CRASHED')
  t.match(error.message, /memory/)
  t.equal(error.retryable, true)
  t.ok(await waitGone(before))
  t.not(await pidOf(kind, 'py-edge', 'verify:pid'), before, 'replaced')
})

t.test('node: unbounded allocation hits --max-old-space-size and is a crash', async (t) => {
  const kind = await makeKind(t, { workers: 1, memoryMb: 64 })
  const before = await pidOf(kind, 'js-edge', 'verify:pid')
  const error = await failure(call(kind, 'js-edge', 'verify:allocate', {}, '', { timeoutS: 20 }))
  t.equal(error.code, 'ARB_PLUGIN_CRASHED')
  t.ok(await waitGone(before))
  t.not(await pidOf(kind, 'js-edge', 'verify:pid'), before, 'replaced')
})

for (const [name, ref] of [['py-edge', 'verify:fork_and_hang'], ['js-edge', 'verify:forkAndHang']]) {
  t.test(`${name}: a plugin that forks a grandchild and hangs leaves no orphan`, async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'arbiter-fork-'))
    t.teardown(async () => await rm(dir, { recursive: true, force: true }))
    const pidfile = join(dir, 'grandchild.pid')
    const kind = await makeKind(t, { workers: 1 })
    const worker = await pidOf(kind, name, 'verify:pid')
    const error = await failure(call(kind, name, ref, { pidfile }, '', { timeoutS: 1.5 }))
    t.equal(error.code, 'ARB_PLUGIN_TIMEOUT')
    const grandchild = Number(await waitFor(async () => await readFile(pidfile, 'utf8').catch(() => undefined)))
    t.ok(grandchild > 0, 'the grandchild was started')
    t.ok(await waitGone(grandchild), `the grandchild ${grandchild} is gone`)
    t.ok(await waitGone(worker), `the worker ${worker} is gone`)
  })
}

for (const [name, ref] of [['py-edge', 'verify:exit_mid_call'], ['py-edge', 'verify:segfault'], ['py-edge', 'verify:exit_politely'], ['js-edge', 'verify:exitMidCall']]) {
  t.test(`${name} ${ref}: the worker dying mid-call is a crash and it is replaced`, async (t) => {
    const kind = await makeKind(t, { workers: 1 })
    const before = await pidOf(kind, name, 'verify:pid')
    const error = await failure(call(kind, name, ref))
    t.equal(error.code, 'ARB_PLUGIN_CRASHED')
    t.equal(error.retryable, true)
    t.match(error.message, /exited with code|killed by SIG/)
    t.ok(await waitGone(before))
    const after = await pidOf(kind, name, 'verify:pid')
    t.not(after, before)
  })
}

t.test('a crash does not affect concurrent calls on other workers', async (t) => {
  const kind = await makeKind(t, { workers: 2 })
  // The first call occupies one worker; the crash, sent while it is busy, starts the second.
  const slow = call(kind, 'py-edge', 'verify:sleep', { seconds: 0.6 })
  const crash = failure(call(kind, 'py-edge', 'verify:exit_mid_call', { seconds: 0.1 }))
  const [slowResult, crashError] = await Promise.all([slow, crash])
  t.equal(slowResult.reward, 1, 'the call on the other worker answered')
  t.equal(crashError.code, 'ARB_PLUGIN_CRASHED')
})

t.test('calls pipelined behind a crash on the same worker run elsewhere, unaffected', async (t) => {
  const kind = await makeKind(t, { workers: 1 })
  await call(kind, 'py-edge', 'verify:one') // start the one worker
  const crash = failure(call(kind, 'py-edge', 'verify:exit_mid_call', { seconds: 0.2 }))
  const behind = [1, 2, 3].map(async () => await call(kind, 'py-edge', 'verify:one'))
  t.equal((await crash).code, 'ARB_PLUGIN_CRASHED')
  for (const result of await Promise.all(behind)) t.equal(result.reward, 1)
})

t.test('a call that waited past its deadline behind a slow one times out without running', async (t) => {
  const kind = await makeKind(t, { workers: 1 })
  await call(kind, 'py-edge', 'verify:one')
  const slow = call(kind, 'py-edge', 'verify:sleep', { seconds: 1.2 }, '', { timeoutS: 5 })
  await new Promise((resolve) => setTimeout(resolve, 100)) // the slow call is running
  const starved = failure(call(kind, 'py-edge', 'verify:one', {}, '', { timeoutS: 0.3 }))
  const error = await starved
  t.equal(error.code, 'ARB_PLUGIN_TIMEOUT')
  t.match(error.message, /did not start/)
  t.equal((await slow).reward, 1, 'the slow call still answers')
  t.equal((await call(kind, 'py-edge', 'verify:one')).reward, 1, 'and the pool carries on')
})

t.test('workers are recycled after maxCalls and reaped when idle', async (t) => {
  const kind = await makeKind(t, { workers: 1, maxCalls: 3, idleS: 0.3 })
  const first = await pidOf(kind, 'py-edge', 'verify:pid')
  t.equal(await pidOf(kind, 'py-edge', 'verify:pid'), first)
  t.equal(await pidOf(kind, 'py-edge', 'verify:pid'), first)
  const fourth = await pidOf(kind, 'py-edge', 'verify:pid')
  t.not(fourth, first, 'a fresh worker after 3 calls')
  t.ok(await waitGone(first), 'the recycled worker is gone')
  t.ok(await waitGone(fourth), 'the idle worker is reaped')
})

t.test('close() kills every worker and leaves no process behind', async (t) => {
  const kind = await makeKind(t, { workers: 2 })
  const pids = await Promise.all([
    pidOf(kind, 'py-edge', 'verify:pid'),
    pidOf(kind, 'js-edge', 'verify:pid'),
    call(kind, 'py-edge', 'verify:sleep', { seconds: 0.05 }).then((r) => Number((r as { message: string }).message))
  ])
  const pending = failure(call(kind, 'py-edge', 'verify:loop', {}, '', { timeoutS: 30 }))
  await new Promise((resolve) => setTimeout(resolve, 100))
  await kind.close?.()
  const error = await pending
  t.ok(['ARB_PLUGIN_CRASHED', 'ARB_SHUTTING_DOWN'].includes(error.code), `a call in flight at close fails (${error.code})`)
  for (const pid of pids) t.ok(await isGone(pid) || await waitGone(pid), `worker ${pid} is gone`)
  t.equal((await failure(call(kind, 'py-edge', 'verify:one'))).code, 'ARB_SHUTTING_DOWN')
})

/** A python3 stand-in: answers the start-up probe (-c) as itself, and starts workers per `mode`. */
async function fakePython (t: { teardown: (fn: () => unknown) => void }, mode: 'broken' | 'slow' | 'flaky' | 'killed'): Promise<string> {
  const { execFileSync } = await import('node:child_process')
  const { chmod, writeFile } = await import('node:fs/promises')
  const real = execFileSync('python3', ['-c', 'import sys; print(sys.executable)'], { encoding: 'utf8' }).trim()
  const dir = await mkdtemp(join(tmpdir(), 'arbiter-python-'))
  t.teardown(async () => await rm(dir, { recursive: true, force: true }))
  const script = join(dir, 'python3')
  const marker = join(dir, 'started-once')
  const start = {
    broken: 'echo "fatal: this interpreter cannot start" >&2; exit 1',
    slow: `sleep 3; exec ${real} "$@"`,
    // The first worker dies before its hello (as if killed from outside); the next ones start.
    flaky: `if [ ! -e ${marker} ]; then touch ${marker}; kill -9 $$; fi; exec ${real} "$@"`,
    // Every worker is killed before its hello, as by an OOM killer under memory pressure.
    killed: 'kill -9 $$'
  }[mode]
  // The start-up probe resolves the interpreter to sys.executable: name this script instead.
  await writeFile(script, `#!/bin/sh\nif [ "$1" = "-c" ]; then echo "$0"; echo 3.11.0; exit 0; fi\n${start}\n`)
  await chmod(script, 0o755)
  return script
}

t.test('a runtime that cannot start: RUNTIME_UNAVAILABLE with its stderr, after one retry', async (t) => {
  const kind = await makeKind(t, { workers: 1, python: await fakePython(t, 'broken') })
  const error = await failure(call(kind, 'py-edge', 'verify:one'))
  t.equal(error.code, 'ARB_PLUGIN_RUNTIME_UNAVAILABLE')
  t.match(error.message, /exited with code 1 before it was ready, 2 times: fatal: this interpreter cannot start/)
  t.equal((await call(kind, 'js-edge', 'verify:one')).reward, 1, 'other runtimes are unaffected')
})

t.test('workers killed by a signal before they are ready: CRASHED (retryable), not runtime unavailable', async (t) => {
  const kind = await makeKind(t, { workers: 1, python: await fakePython(t, 'killed') })
  const error = await failure(call(kind, 'py-edge', 'verify:one'))
  t.equal(error.code, 'ARB_PLUGIN_CRASHED')
  t.equal(error.retryable, true)
  t.match(error.message, /was killed by SIGKILL before it was ready, 2 times/)
})

t.test('a worker that dies before it is ready takes no call down with it', async (t) => {
  const python = await fakePython(t, 'flaky')
  const kind = await makeKind(t, { workers: 1, python })
  t.match(kind.describe(), { python: { executable: python } })
  const results = await Promise.all([1, 2, 3].map(async () => await call(kind, 'py-edge', 'verify:one')))
  t.same(results.map((r) => r.reward), [1, 1, 1], 'the calls ran on the next worker')
})

t.test('a worker that does not start within the deadline: TIMEOUT, and the calls behind it still run', async (t) => {
  const kind = await makeKind(t, { workers: 1, python: await fakePython(t, 'slow') })
  const first = failure(call(kind, 'py-edge', 'verify:one', {}, '', { timeoutS: 1 }))
  const patient = call(kind, 'py-edge', 'verify:one', {}, '', { timeoutS: 20 })
  const error = await first
  t.equal(error.code, 'ARB_PLUGIN_TIMEOUT')
  t.match(error.message, /did not start within 1 s/)
  t.equal((await patient).reward, 1, 'requeued onto a new worker, not failed as runtime unavailable')
})
