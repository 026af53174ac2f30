// Starts dynalite in memory on a free port of 127.0.0.1, tables active at
// once, with TransactWriteItems served beside it (transact.js) and its
// expression parses remembered (parsecache.js), and prints
// "listening <port>". It exits when its stdin closes, so a test that dies
// does not leave it running.
require('./parsecache').install()
const dynalite = require('dynalite')
const { wrap } = require('./transact')

const server = dynalite({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 })
const [handler] = server.listeners('request')
server.removeAllListeners('request')
server.on('request', wrap(handler))
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`listening ${server.address().port}\n`)
})
process.stdin.resume()
process.stdin.on('end', () => process.exit(0))
process.stdin.on('close', () => process.exit(0))
