"""What changes runs on a user's behalf: checked launches into the queue (``launch``), and the UI's other
writes (``runs``: open the store, save a planned domain, cancel, requeue, delete). The frontend writes
through here and reads through ``domainbench.query``, never through the store's modules."""
