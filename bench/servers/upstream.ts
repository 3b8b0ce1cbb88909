// A scoring endpoint that answers at once: the upstream for the endpoint benchmark.
import { createServer } from 'node:http'

const answer = Buffer.from('{"reward":1,"message":"ok"}')
const server = createServer((request, response) => {
  request.resume()
  request.on('end', () => {
    response.writeHead(200, { 'content-type': 'application/json', 'content-length': answer.length })
    response.end(answer)
  })
})
server.keepAliveTimeout = 30_000
server.listen(Number(process.env.PORT ?? 0), '127.0.0.1')
