// The built server as a process: configuration errors stop it at start with the variable named.
import t from 'tap'
import { startServer } from './helpers/server-process.js'

t.test('an invalid setting exits at start naming the variable', async (t) => {
  const server = await startServer(t, { PORT: 'abc' })
  const { code } = await server.exited
  t.equal(code, 78)
  t.match(server.stderr(), /invalid setting PORT: must be a whole number, got "abc"/)
})

t.test('an unknown ARBITER_ variable exits at start naming it', async (t) => {
  const server = await startServer(t, { ARBITER_JUDGE_URL: 'http://127.0.0.1:1' })
  const { code } = await server.exited
  t.equal(code, 78)
  t.match(server.stderr(), /ARBITER_JUDGE_URL: is not an Arbiter setting/)
})

t.test('a bad allowlist entry exits at start naming the variable', async (t) => {
  const server = await startServer(t, { ARBITER_ENDPOINT_ALLOW: '10.0.0.0/99' })
  const { code } = await server.exited
  t.equal(code, 78)
  t.match(server.stderr(), /ARBITER_ENDPOINT_ALLOW/)
})

t.test('on the embedded defaults it serves, and SIGTERM exits 0', async (t) => {
  const server = await startServer(t)
  t.match(server.url, /^http:\/\/127\.0\.0\.1:\d+$/)
  const ready = await fetch(`${server.url}/readyz`)
  t.equal(ready.status, 200)
  server.child.kill('SIGTERM')
  const { code } = await server.exited
  t.equal(code, 0)
})
