// Network faults at volume: each failure mode, twenty requests at once, must get its expected
// answer (a 502 with the right code, or a 200), and the service must answer normally after.
import t from 'tap'
import { buildTestApp, verifyBody } from '../helpers/build-app.js'
import { EXPECTED, startFaultyServer } from '../helpers/faulty-server.js'

const CONCURRENT = 20

t.test('every network failure mode, under concurrency, gets its expected answer', async (t) => {
  const faulty = await startFaultyServer(t)
  const { app } = await buildTestApp(t, { logLevel: 'silent' })
  for (const [mode, expected] of Object.entries(EXPECTED)) {
    const responses = await Promise.all(Array.from({ length: CONCURRENT }, async () =>
      await app.inject({ method: 'POST', url: '/v1/verify', payload: verifyBody('endpoint', `${faulty.url}/${mode}`, { verifier: { timeout_s: 0.5 } }) })))
    for (const response of responses) {
      t.equal(response.statusCode, expected.status, `${mode}: status`)
      if (expected.status === 502) t.equal(response.json().code, expected.code, `${mode}: code`)
      else t.equal(response.json().reward, 0.75, `${mode}: reward`)
    }
    const after = await app.inject({ method: 'POST', url: '/v1/verify', payload: verifyBody('endpoint', `${faulty.url}/ok`) })
    t.equal(after.statusCode, 200, `${mode}: the service answers normally afterwards`)
  }
})

t.test('a flapping scorer: every answer is a reward or a reset, none is lost or zeroed', async (t) => {
  const faulty = await startFaultyServer(t)
  const { app } = await buildTestApp(t, { logLevel: 'silent' })
  const responses = await Promise.all(Array.from({ length: 40 }, async () =>
    await app.inject({ method: 'POST', url: '/v1/verify', payload: verifyBody('endpoint', `${faulty.url}/flap`) })))
  const ok = responses.filter((r) => r.statusCode === 200)
  const failed = responses.filter((r) => r.statusCode === 502)
  t.equal(ok.length + failed.length, 40)
  t.ok(ok.length > 0 && failed.length > 0, `both outcomes seen (${ok.length} ok, ${failed.length} failed)`)
  t.ok(ok.every((r) => r.json().reward === 0.75))
  t.ok(failed.every((r) => r.json().code === 'ARB_ENDPOINT_CONNECTION_RESET'))
})
