// PluginPool on its own: a worker stopped while its digest re-check still runs (no process yet).
import t from 'tap'
import { PluginPool } from '../../../src/kinds/plugin/pool.js'
import { memoryLog } from './helpers.js'

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
