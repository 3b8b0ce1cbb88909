import t from 'tap'
import { Writable } from 'node:stream'
import { createLogger } from '../src/logger.js'

t.test('header secrets are redacted if a header object is ever logged', async (t) => {
  let text = ''
  const destination = new Writable({ write (chunk: Buffer, _encoding, callback) { text += chunk.toString(); callback() } })
  const log = createLogger('debug', { destination })
  log.info({ req: { headers: { authorization: 'Bearer SECRET-1', 'x-api-key': 'SECRET-2', accept: 'application/json' } } }, 'debug line')
  log.info({ headers: { authorization: 'Bearer SECRET-3' } }, 'upstream headers')
  t.notMatch(text, /SECRET-/)
  t.match(text, /"authorization":"\[redacted\]"/)
  t.match(text, /"accept":"application\/json"/, 'other headers stay')
})
