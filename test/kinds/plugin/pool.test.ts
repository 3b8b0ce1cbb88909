// PluginPool on its own: a worker stopped while its digest re-check still runs (no process yet),
// and where calls go (packed onto one worker, or spread over the pool).
import t, { type Test } from 'tap'
import { PluginPool } from '../../../src/kinds/plugin/pool.js'
import { scrubbedEnv, spawnSpec } from '../../../src/kinds/plugin/runtimes.js'
import { FIXTURES, memoryLog } from './helpers.js'

function pool (beforeStart: () => Promise<undefined>): PluginPool {
  return new PluginPool({
    label: 'unspawned (node)',
    spawn: { command: process.execPath, args: ['-e', 'setTimeout(() => {}, 60000)'], cwd: process.cwd(), env: {} },
    size: 1,
    maxCalls: 100,
    log: memoryLog(),
    beforeStart
  })
}

const request = (timeoutMs: number) => ({ identity: { kind: 'plugin', ref: 'verify:score' }, module: 'verify', file: '/nowhere/verify.mjs', callable: 'score', task: {}, trajectory: '', timeoutMs })

t.test('closed before its worker ever started: the call is shutting down, not a crash', async (t) => {
  const plugins = pool(async () => await new Promise<undefined>(() => {})) // the re-check never ends
  const pending = plugins.call(request(60_000)).catch((error: unknown) => error)
  await new Promise((resolve) => setTimeout(resolve, 20))
  await plugins.close()
  t.match(await pending, { code: 'ARB_SHUTTING_DOWN', verifier: { kind: 'plugin', ref: 'verify:score' } })
})

t.test('timed out before its worker ever started: a timeout naming the verifier', async (t) => {
  const plugins = pool(async () => await new Promise<undefined>(() => {}))
  t.teardown(async () => { await plugins.close() })
  t.match(await plugins.call(request(50)).catch((error: unknown) => error), { code: 'ARB_PLUGIN_TIMEOUT', retryable: true, verifier: { kind: 'plugin', ref: 'verify:score' } })
})

// Dispatch, with real Node workers over the js-edge fixture. The two thresholds are set per test
// so that what a call costs on a loaded test machine does not decide the outcome.
const JS_EDGE = `${FIXTURES}/js-edge`

function jsPool (t: Test, thresholds: { packServiceMs: number, pipelineBudgetMs: number }): PluginPool {
  const plugins = new PluginPool({
    label: 'js-edge (node)',
    spawn: spawnSpec('node', { pluginPath: JS_EDGE, memoryMb: 256, env: scrubbedEnv(process.env) }),
    size: 2,
    maxCalls: 1000,
    log: memoryLog(),
    ...thresholds
  })
  t.teardown(async () => { await plugins.close() })
  return plugins
}

/** Calls js-edge's `callable`; its answer's message is the pid of the worker that ran it. */
async function pidOf (plugins: PluginPool, callable: 'pid' | 'sleep', task: Record<string, unknown> = {}): Promise<string> {
  const verdict = await plugins.call({ identity: { kind: 'plugin', ref: `verify:${callable}` }, module: 'verify', file: `${JS_EDGE}/verify.mjs`, callable, task, trajectory: '', timeoutMs: 10_000 })
  return verdict.message ?? ''
}

t.test('a cheap verifier\'s concurrent calls are packed onto one worker', async (t) => {
  const plugins = jsPool(t, { packServiceMs: 60_000, pipelineBudgetMs: 60_000 })
  const first = await pidOf(plugins, 'pid') // its service time is now known, and cheap
  const pids = await Promise.all(Array.from({ length: 20 }, async () => await pidOf(plugins, 'pid')))
  t.same(new Set(pids), new Set([first]), 'every call ran on the first worker; no second one was started')
})

t.test('a verifier that is not cheap spreads over the pool', async (t) => {
  const plugins = jsPool(t, { packServiceMs: 0, pipelineBudgetMs: 60_000 })
  await pidOf(plugins, 'pid')
  const pids = await Promise.all([pidOf(plugins, 'pid'), pidOf(plugins, 'pid')])
  t.equal(new Set(pids).size, 2, 'the second concurrent call got a worker of its own')
})

t.test('nothing packs behind a call of a verifier not yet timed', async (t) => {
  const plugins = jsPool(t, { packServiceMs: 60_000, pipelineBudgetMs: 60_000 })
  const first = await pidOf(plugins, 'pid')
  const order: string[] = []
  const slow = pidOf(plugins, 'sleep', { seconds: 1.5 }).then((pid) => { order.push('slow'); return pid })
  const cheap = await pidOf(plugins, 'pid') // at once: the slow call has barely started
  order.push('cheap')
  t.equal(await slow, first, 'the slow call ran on the first worker')
  t.not(cheap, first, 'the cheap call went to another worker instead of queueing behind a call of unknown length')
  t.same(order, ['cheap', 'slow'])
})

t.test('a call running past the budget stops calls packing behind it', async (t) => {
  const plugins = jsPool(t, { packServiceMs: 60_000, pipelineBudgetMs: 100 })
  const first = await pidOf(plugins, 'pid')
  t.equal(await pidOf(plugins, 'sleep', { seconds: 0 }), first, 'sleep is timed, and cheap by this pool\'s measure')
  const order: string[] = []
  const slow = pidOf(plugins, 'sleep', { seconds: 1.5 }).then((pid) => { order.push('slow'); return pid })
  await new Promise((resolve) => setTimeout(resolve, 300)) // the slow call has now run 3x the budget
  const cheap = await pidOf(plugins, 'pid')
  order.push('cheap')
  t.equal(await slow, first, 'the slow call ran on the first worker')
  t.not(cheap, first, 'the cheap call went to another worker instead of waiting behind it')
  t.same(order, ['cheap', 'slow'])
})

/**
 * A stand-in worker speaking the protocol on fd 3: hello, then for each call line the answer
 * `answer(call)` gives, written in two pieces so that a line arrives split across reads.
 */
function scriptedPool (t: Test, answer: string): { plugins: PluginPool, log: ReturnType<typeof memoryLog> } {
  const script = `
    const net = require('node:net')
    const socket = new net.Socket({ fd: 3, readable: true, writable: true })
    socket.write(JSON.stringify({ hello: { pid: process.pid } }) + '\\n')
    let pending = ''
    socket.on('data', (chunk) => {
      pending += chunk
      let end
      while ((end = pending.indexOf('\\n')) !== -1) {
        const call = JSON.parse(pending.slice(0, end))
        pending = pending.slice(end + 1)
        const line = (${answer})(call) + '\\n'
        socket.write(line.slice(0, 5))
        setTimeout(() => socket.write(line.slice(5)), 20)
      }
    })`
  const log = memoryLog()
  const plugins = new PluginPool({
    label: 'scripted (node)',
    spawn: { command: process.execPath, args: ['-e', script], cwd: process.cwd(), env: {} },
    size: 1,
    maxCalls: 100,
    log
  })
  t.teardown(async () => { await plugins.close() })
  return { plugins, log }
}

t.test('protocol lines: an answer split across reads is read whole', async (t) => {
  const { plugins } = scriptedPool(t, '(call) => JSON.stringify({ id: call.id, ok: true, reward: 0.25, message: "line\\nbreak é" })')
  const verdict = await plugins.call(request(5_000))
  t.same(verdict, { reward: 0.25, message: 'line\nbreak é' }, 'a newline inside a string is escaped JSON, not a line end')
})

t.test('protocol lines: a worker that writes an unreadable line or answers out of order is killed; the call fails as crashed', async (t) => {
  for (const [answer, logged] of [
    ['() => "this is not JSON"', /unreadable line/],
    ['() => "null"', /unreadable line/],
    ['(call) => JSON.stringify({ id: call.id + 1, ok: true, reward: 1 })', /answered out of order/]
  ] as const) {
    const { plugins, log } = scriptedPool(t, answer)
    const error = await plugins.call(request(5_000)).catch((failure: unknown) => failure)
    t.match(error, { code: 'ARB_PLUGIN_CRASHED', verifier: { kind: 'plugin', ref: 'verify:score' } }, `${answer}: never a reward`)
    t.ok(log.lines.some((line) => line.level === 'error' && logged.test(line.msg ?? '')), `logged: ${String(logged)}`)
  }
})
