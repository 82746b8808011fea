#!/usr/bin/env node
// Starts @vercel/cosmosdb-server with one fix: reading a missing item answers 404 NotFound
// (as Cosmos DB does) instead of 500 "Cannot read properties of undefined".
//
// The fix lives here, in the test/local harness, so that the Cosmos store keeps mapping only
// a real 404 to SessionNotFound and never mistakes a server error for a missing session.
//
// Keep-alive is on (the package's CLI leaves it off): a TLS handshake per request made every
// call ~60 ms slower.
//
// Usage: node tests/cosmos_test_server.js [--host 127.0.0.1] [-p PORT]
"use strict";

const path = require("path");

const pkgDir = path.dirname(require.resolve("@vercel/cosmosdb-server/package.json"));
const lib = (name) => require(path.join(pkgDir, "lib", name));

// routes.js captures the handler when it is first loaded, so patch the module before
// anything requires routes.js (index.js does).
const readDocument = lib("handler/read-document");
const partitionHeader = lib("utils/get-partition-from-header");
const originalRead = readDocument.default;

readDocument.default = (account, req, res, params) => {
  const collection = account.database(params.dbId).collection(params.collId);
  if (collection.read()) {
    let partitionKey;
    try {
      partitionKey = partitionHeader.parsePartitionKey(partitionHeader.default(req), params.docId);
    } catch (err) {
      return originalRead(account, req, res, params);
    }
    if (!collection.document(params.docId, partitionKey).read()) {
      res.statusCode = 404;
      return {
        code: "NotFound",
        message: "Entity with the specified id does not exist in the system."
      };
    }
  }
  return originalRead(account, req, res, params);
};

const { createHttpsServer } = lib("index");

const argv = process.argv.slice(2);
let host = "127.0.0.1";
let port = 8081;
while (argv.length) {
  const key = argv.shift();
  if (key === "--host") host = argv.shift();
  else if (key === "-p" || key === "--port") port = parseInt(argv.shift(), 10);
}

const server = createHttpsServer({ keepAlive: true }).listen(port, host, () => {
  // eslint-disable-next-line no-console
  console.log(`Ready to accept HTTPS connections at ${host}:${server.address().port}`);
});

const stop = () => {
  server.close(() => process.exit(0));
  server.closeAllConnections(); // keep-alive connections would hold close() open
  setTimeout(() => process.exit(0), 1000).unref();
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
