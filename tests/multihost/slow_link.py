"""A TCP relay that holds every chunk for a while each way, as a link with
latency does: `SlowLink(target_port_file, one_way_ms)` listens on a free
port of 127.0.0.1 and relays each connection to the port written in
`target_port_file` (read when the connection comes, so the relay can be
advertised before the daemon behind it starts). The kernel offers no
netem here, so latency is made in user space; bytes keep their order.
SlowWorkerCluster: a dispatcher and workers on 127.0.0.1, each worker
advertised behind a SlowLink (tests/multihost/test_slow_links.py,
bench/slow_link_read.py)."""

import asyncio
import subprocess
import threading
import time

from multihost_cluster import DISPATCHERD, SLUICE, WORKERD, wait_for


class SlowLink:
    def __init__(self, target_port_file, one_way_ms):
        self._target_port_file = target_port_file
        self._delay = one_way_ms / 1000
        self._loop = asyncio.new_event_loop()
        started = threading.Event()
        self.port = None

        async def serve():
            self._stop = asyncio.Event()
            server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
            self.port = server.sockets[0].getsockname()[1]
            started.set()
            await self._stop.wait()
            server.close()
            relays = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
            for task in relays:
                task.cancel()
            await asyncio.gather(*relays, return_exceptions=True)

        self._thread = threading.Thread(target=lambda: self._loop.run_until_complete(serve()), daemon=True)
        self._thread.start()
        assert started.wait(10), "the slow link did not start"

    async def _pump(self, reader, writer):
        queue = asyncio.Queue()

        async def read():
            while True:
                data = await reader.read(1 << 16)
                await queue.put((time.monotonic() + self._delay, data))
                if not data:
                    return

        async def write():
            while True:
                due, data = await queue.get()
                await asyncio.sleep(max(0.0, due - time.monotonic()))
                if not data:
                    writer.close()
                    return
                writer.write(data)
                await writer.drain()

        await asyncio.gather(read(), write(), return_exceptions=True)

    async def _relay(self, client_reader, client_writer):
        try:
            with open(self._target_port_file) as f:
                target = int(f.read().strip())
            upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", target)
        except (OSError, ValueError):
            client_writer.close()
            return
        await asyncio.gather(self._pump(client_reader, upstream_writer), self._pump(upstream_reader, client_writer),
                             return_exceptions=True)

    def close(self):
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=5)
        self._loop.close()


class SlowWorkerCluster:
    """A dispatcher and `workers` workers on 127.0.0.1, each worker
    advertised behind a SlowLink of `one_way_ms`."""

    def __init__(self, tmp_path, workers, one_way_ms):
        self.tmp, self.processes, self.links = tmp_path, [], []
        self._start(["dispatcherd", DISPATCHERD, "--port", "0", "--insecure", "--port-file",
                     str(tmp_path / "dispatcher.port")], tmp_path / "dispatcher.port")
        self.service = f"grpc://127.0.0.1:{(tmp_path / 'dispatcher.port').read_text().strip()}"
        for i in range(workers):
            port_file = tmp_path / f"worker{i}.port"
            link = SlowLink(str(port_file), one_way_ms)
            self.links.append(link)
            self._start([f"worker{i}", WORKERD, "--dispatcher", self.service[len("grpc://"):], "--port", "0",
                         "--insecure", "--drain-timeout-ms", "0", "--advertised-address", f"127.0.0.1:{link.port}",
                         "--port-file",
                         str(port_file)], port_file)

    def _start(self, argv, port_file):
        name, argv = argv[0], argv[1:]
        log = open(self.tmp / f"{name}.log", "w")
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        self.processes.append(process)
        wait_for(port_file, process, name)

    def read(self, steps, timeout=60):
        path = self.tmp / "p.yaml"
        path.write_text("pipeline:\n" + "".join(f"  - {step}\n" for step in steps))
        start = time.monotonic()
        done = subprocess.run([SLUICE, "read", str(path), "--service", self.service], capture_output=True,
                              timeout=timeout)
        return done.returncode, done.stdout.decode().split(), done.stderr.decode(), time.monotonic() - start

    def close(self):
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for link in self.links:
            link.close()
