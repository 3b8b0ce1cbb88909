// SIGTERM on the built server as a process: work in flight finishes and is answered, new work
// and readiness get a 503 meanwhile, and the process exits 0. A second signal exits at once.
import t from 'tap'
import { Agent, request } from 'undici'
import { verifyBody } from './helpers/build-app.js'
import { startServer } from './helpers/server-process.js'
import { startUpstream } from './helpers/upstream.js'

t.test('SIGTERM drains: every request in flight gets its answer, then exit 0', async (t) => {
  let release: () => void = () => {}
  const gate = new Promise<void>((resolve) => { release = resolve })
  const upstream = await startUpstream(t, async (_request, response) => {
    await gate
    response.writeHead(200, { 'content-type': 'application/json' })
    response.end('{"reward": 0.5}')
  })
  const server = await startServer(t)
  const agent = new Agent({ connections: 16 })
  t.teardown(() => agent.close())
  const post = async (body: unknown) => await request(`${server.url}/v1/verify`, { method: 'POST', dispatcher: agent, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })

  const inFlight = Array.from({ length: 6 }, async () => {
    const response = await post(verifyBody('endpoint', upstream.url))
    return { status: response.statusCode, body: await response.body.json() as Record<string, unknown> }
  })
  while (upstream.received.length < 6) await new Promise((resolve) => setTimeout(resolve, 20))

  server.child.kill('SIGTERM')
  await new Promise((resolve) => setTimeout(resolve, 200))
  const ready = await request(`${server.url}/readyz`, { dispatcher: agent })
  t.equal(ready.statusCode, 503, 'readiness turns 503 at once')
  t.match(await ready.body.json(), { status: 'draining' })
  const refused = await post(verifyBody('endpoint', upstream.url))
  t.equal(refused.statusCode, 503, 'new work is refused with 503')
  t.equal(refused.headers['retry-after'], '1')
  t.match(await refused.body.json(), { code: 'ARB_SHUTTING_DOWN' })

  release()
  const answers = await Promise.all(inFlight)
  t.same(answers.map((a) => a.status), [200, 200, 200, 200, 200, 200], 'no accepted request was dropped')
  t.ok(answers.every((a) => a.body.reward === 0.5))
  const { code } = await server.exited
  t.equal(code, 0)
  t.match(server.stdout(), /"msg":"stopped"/)
})

t.test('a second signal exits at once', async (t) => {
  const upstream = await startUpstream(t, () => { /* never answers */ })
  const server = await startServer(t)
  const pending = fetch(`${server.url}/v1/verify`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(verifyBody('endpoint', upstream.url)) }).catch(() => 'connection closed')
  while (upstream.received.length < 1) await new Promise((resolve) => setTimeout(resolve, 20))
  server.child.kill('SIGTERM')
  await new Promise((resolve) => setTimeout(resolve, 200))
  t.equal(server.child.exitCode, null, 'still draining after the first signal')
  server.child.kill('SIGTERM')
  const { code } = await server.exited
  t.equal(code, 1)
  await pending
})
