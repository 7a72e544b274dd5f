#!/usr/bin/python3
"""Serves kvscope's site (build-web/site) on this machine.

--coi sends the two headers that make the page cross-origin isolated (threads,
SharedArrayBuffer); without them the page's service worker (coi-serviceworker)
adds them and reloads once, as on GitHub Pages or any plain static host.
Usage: serve.py DIR [--port 8000] [--bind 127.0.0.1] [--coi]"""
import argparse
import functools
import http.server
import socketserver


class Handler(http.server.SimpleHTTPRequestHandler):
    coi = False
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map,
                      '.wasm': 'application/wasm', '.js': 'text/javascript', '.data': 'application/octet-stream'}

    def end_headers(self):
        if self.coi:
            self.send_header('Cross-Origin-Opener-Policy', 'same-origin')
            self.send_header('Cross-Origin-Embedder-Policy', 'require-corp')
        self.send_header('Cache-Control', 'no-store')
        super().end_headers()

    def log_message(self, *a):
        pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('dir')
    ap.add_argument('--port', type=int, default=8000)
    ap.add_argument('--bind', default='127.0.0.1')
    ap.add_argument('--coi', action='store_true', help='send COOP/COEP (else the service worker adds them)')
    a = ap.parse_args()
    Handler.coi = a.coi
    socketserver.ThreadingTCPServer.allow_reuse_address = True
    socketserver.ThreadingTCPServer.daemon_threads = True
    with socketserver.ThreadingTCPServer((a.bind, a.port), functools.partial(Handler, directory=a.dir)) as srv:
        port = srv.server_address[1]
        host = 'localhost' if a.bind in ('127.0.0.1', '0.0.0.0') else a.bind
        print(f'kvscope: open http://{host}:{port}/ (serving {a.dir}; isolation headers: '
              f'{"on" if a.coi else "off, the service worker adds them"}; Ctrl-C stops)', flush=True)
        srv.serve_forever()


if __name__ == '__main__':
    main()
