"""The messages between the server and its clients, declared once (``messages``) and checked at the boundary
(``replies``): the client builds its replies from these declarations and the server accepts nothing else."""
