// Arbiter's full request path with a verifier that answers at once: what the service itself
// costs per verification (hooks, validation, admission, logging, metrics, serialization).
import { buildApp } from '../../src/app.js'
import { configWith } from '../../src/config.js'
import { createLogger } from '../../src/logger.js'

const config = configWith({ logLevel: 'info', host: '127.0.0.1', port: Number(process.env.PORT ?? 0) })
const app = await buildApp(config, {
  logger: createLogger('info'),
  kinds: [{
    kind: 'endpoint',
    defaultTimeoutS: 60,
    verify: async (context) => ({ reward: 1, success: true, message: '', output: '', verifier: { kind: 'endpoint', ref: context.manifest.verifier.ref } }),
    describe: () => ({})
  }]
})
await app.listen({ host: config.host, port: config.port })
app.arbiter.lifecycle.markReady()
process.once('SIGINT', () => { void app.close().then(() => process.exit(0)) })
