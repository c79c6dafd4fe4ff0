"""`python -m prof` names what a reader of the table takes it to be, with
no docs at hand (docs/TORCH.md, "Module names"): each module the script
calls itself is a stage of the name the script gives it (a GAN's `netG`
and `netD`, not a `forward` that is one of them), its calls in evaluation
(torch.no_grad(), model.eval()) are `model (eval)`, apart from training; a
script with no optimizer gets a step per backward (so periodic summaries
come); PROF_TORCH=1 records without PROF=1; and an exception inside a
module, or inside backward, shows python's traceback, not prof's frames.
Tiny CPU models, a few iterations each.
"""
import json
import subprocess
import sys
import textwrap

from conftest import child_env, needs_torch

pytestmark = needs_torch

COMMON = """
import sys
import torch
from torch import nn
torch.manual_seed(0)
torch.set_num_threads(1)
"""


def run(tmp_path, body, plain=False, **env):
    """Run the script under `python -m prof` (or plain python), its
    summaries as JSON in a file; returns (the final summary's rows by
    name, every summary object, the process)."""
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(COMMON) + textwrap.dedent(body))
    summary = tmp_path / "summary.json"
    e = child_env(PROF_SUMMARY=str(summary), PROF_SUMMARY_FORMAT="json", PROF_LIVE="0", **env)
    proc = subprocess.run([sys.executable, *([] if plain else ["-m", "prof"]), str(script)], env=e,
                          cwd=str(tmp_path), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    objs = [json.loads(line) for line in summary.read_text().splitlines()]
    final = objs[-1]
    assert final["kind"] == "final", final
    return {r["name"]: r for r in final["total"]["stages"]}, objs, proc


def test_gan_two_models_are_two_stages(tmp_path):
    r, objs, _ = run(tmp_path, """
        class Generator(nn.Module):
            def __init__(self):
                super().__init__()
                self.main = nn.Sequential(nn.Linear(4, 8), nn.Tanh())
            def forward(self, z):
                return self.main(z)

        class Discriminator(nn.Module):
            def __init__(self):
                super().__init__()
                self.main = nn.Sequential(nn.Linear(8, 1), nn.Sigmoid())
            def forward(self, x):
                return self.main(x)

        netG, netD = Generator(), Discriminator()
        criterion = nn.BCELoss()
        optimizerD = torch.optim.Adam(netD.parameters())
        optimizerG = torch.optim.Adam(netG.parameters())
        for i in range(3):
            netD.zero_grad()
            real = torch.randn(2, 8)
            errD_real = criterion(netD(real), torch.ones(2, 1))
            errD_real.backward()
            fake = netG(torch.randn(2, 4))
            errD_fake = criterion(netD(fake.detach()), torch.zeros(2, 1))
            errD_fake.backward()
            optimizerD.step()
            netG.zero_grad()
            errG = criterion(netD(fake), torch.ones(2, 1))
            errG.backward()
            optimizerG.step()
    """)
    assert "forward" not in r, sorted(r)
    assert r["netD"]["count"] == 9 and r["netD"]["parent"] is None, sorted(r)
    assert r["netG"]["count"] == 3 and r["netG"]["parent"] is None, sorted(r)
    assert r["netD.main"]["parent"] == "netD" and r["netG.main"]["parent"] == "netG"
    assert r["criterion"]["count"] == 9
    # The first optimizer stepped ends the iteration; both are `optimizer`.
    assert objs[-1]["step"] == 3 and r["optimizer"]["count"] == 6


def test_evaluation_apart_from_training(tmp_path):
    r, _, _ = run(tmp_path, """
        model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 1))
        loss_fn = nn.MSELoss()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(2):
            model.train()
            for _ in range(3):
                opt.zero_grad()
                loss_fn(model(torch.randn(2, 4)), torch.zeros(2, 1)).backward()
                opt.step()
            model.eval()
            with torch.no_grad():           # the usual validation loop
                for _ in range(2):
                    loss_fn(model(torch.randn(2, 4)), torch.zeros(2, 1))
            model(torch.randn(2, 4))        # eval mode alone
        model.train()
        with torch.inference_mode():        # no grad alone
            model(torch.randn(2, 4))
    """)
    assert r["model"]["count"] == 6, sorted(r)
    assert r["model (eval)"]["count"] == 7 and r["model (eval)"]["parent"] is None, sorted(r)
    assert r["loss_fn"]["count"] == 6 and r["loss_fn (eval)"]["count"] == 4, sorted(r)
    assert r["backward"]["count"] == 6 and r["optimizer"]["count"] == 6


NO_OPTIMIZER = """
    # word_language_model's loop: no torch.optim, the script updates the
    # parameters itself.
    model = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 1))
    lr = 0.1
    for i in range(4):
        model.zero_grad()
        loss = model(torch.randn(2, 4)).pow(2).mean()
        loss.backward()
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
"""


def test_steps_without_an_optimizer(tmp_path):
    r, objs, _ = run(tmp_path, NO_OPTIMIZER, PROF_SUMMARY_EVERY="2steps")
    assert objs[-1]["step"] == 4, objs[-1]["step"]
    assert [o["step"] for o in objs if o["kind"] == "periodic"][:1] == [2], objs
    assert r["model"]["count"] == 4 and r["backward"]["count"] == 4


def test_prof_torch_alone_records(tmp_path):
    # PROF_TORCH=1 and `import prof` in a script started by plain python,
    # without PROF=1.
    r, objs, _ = run(tmp_path, "import prof\n" + textwrap.dedent(NO_OPTIMIZER), plain=True,
                     PROF_TORCH="1")
    assert r["model"]["count"] == 4 and objs[-1]["step"] == 4, sorted(r)


RAISES = """
    class Block(nn.Module):
        def __init__(self, bad):
            super().__init__()
            self.fc = nn.Linear(4, 4)
            self.bad = bad
        def forward(self, x):
            if self.bad:
                raise ValueError("bad block")
            return self.fc(x)

    class Twice(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return 2 * x
        @staticmethod
        def backward(ctx, g):
            raise RuntimeError("no gradient here")

    model = nn.Sequential(Block(False), Block(sys.argv[1] == "forward"))
    out = Twice.apply(model(torch.randn(2, 4))).sum()
    out.backward()
"""


def test_exception_inside_a_module_or_backward_traceback_as_python(tmp_path):
    script = tmp_path / "raises.py"
    script.write_text(textwrap.dedent(COMMON) + textwrap.dedent(RAISES))
    for where in ("forward", "backward"):
        out = [subprocess.run([sys.executable, *pre, "raises.py", where], cwd=str(tmp_path),
                              env=child_env(), capture_output=True, text=True, timeout=120)
               for pre in ([], ["-m", "prof"])]
        plain, under = out
        assert plain.returncode == 1 and "Traceback" in plain.stderr, plain.stderr
        assert (under.returncode, under.stderr) == (plain.returncode, plain.stderr), \
            f"python:\n{plain.stderr}\npython -m prof:\n{under.stderr}"
