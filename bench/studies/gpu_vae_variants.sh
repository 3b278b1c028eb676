#!/usr/bin/env bash
# Mel-VAE variants side by side on one GPU: each VAE trains for T1 s, then latent diffusion over each
# for T2 s (fits stopped by SIGTERM, which saves a checkpoint), exported with the shipped sampling settings, then
# bench/studies/vae_pitch_check.py (reconstructions and generated kicks) and `kicktrain eval`. Artifacts come back split
# in 15 MB parts under $OUT (the device tool returns files of at most 16 MB). Ran 2026-12-04 on one H200:
#   T1=210 T2=120 bash bench/studies/gpu_vae_variants.sh      (results: bench/results/gpu-vae-variants-2026-12-04.json)
set -uo pipefail
T1=${T1:-180}; T2=${T2:-120}
R=/tmp/r; mkdir -p $R; O=${OUT:-/tmp/out}; mkdir -p $O
kit=kickserver/data/kicks
export OMP_NUM_THREADS=8 PYTHONUNBUFFERED=1
nvidia-smi -L; python3 -c "import torch,torchaudio,soundfile;print(torch.__version__,torchaudio.__version__,torch.cuda.is_available())"
common="--device ${DEV:-cuda} --max-steps 1000000 --set data.val_fraction=0.2 --set train.sample_every=0 --set train.ckpt_every=5000 --no-progress"
# the first run (T1=210 T2=120) also had [v0]="... recon_linear_weight=0" and [v1]="... recon_linear_weight=0.5"
declare -A V=(
 [v2]="--preset small --set vae.recon_linear_weight=2"
 [v3]="--preset small --set vae.recon_linear_weight=1 --set vae.recon_low_weight=4"
)
start=$(date +%s)
for k in "${!V[@]}"; do
  python3 -m trainer.cli fit $kit --family mel-vae ${V[$k]} --set inverter.kind=griffin-lim --run-dir $R/$k $common > $R/$k.log 2>&1 &
  echo $! > $R/$k.pid
done
sleep $T1
for k in "${!V[@]}"; do kill -TERM $(cat $R/$k.pid); done; wait
echo "VAE stage $(( $(date +%s) - start )) s"
for k in "${!V[@]}"; do tail -3 $R/$k.log; python3 -m trainer.cli export $R/$k --out $R/$k.safetensors --set inverter.kind=griffin-lim 2>&1 | tail -1; done
python3 -m bench.studies.vae_pitch_check vae $R/v*.safetensors > $R/vaecheck.txt 2>&1 & CHK=$!
# the VAEs go to $OUT first, so a run cut off by its time limit still brings them back; the latent models replace them
for k in "${!V[@]}"; do split -b 15M -d $R/$k.safetensors $O/$k.part; done
start=$(date +%s)
for k in "${!V[@]}"; do
  python3 -m trainer.cli fit $kit --family latent-diffusion --vae $R/$k.safetensors --preset small --run-dir $R/ld-$k $common > $R/ld-$k.log 2>&1 &
  echo $! > $R/ld-$k.pid
done
sleep $T2
for k in "${!V[@]}"; do kill -TERM $(cat $R/ld-$k.pid); done
wait $(for k in "${!V[@]}"; do cat $R/ld-$k.pid; done)
echo "LD stage $(( $(date +%s) - start )) s"
for k in "${!V[@]}"; do tail -2 $R/ld-$k.log; python3 -m trainer.cli export $R/ld-$k --out $R/ld-$k.safetensors --set sampling.steps=10 --set sampling.time_power=0.35 --set sampling.guidance=2 2>&1 | tail -1; done
rm -f $O/v*.part*
for k in "${!V[@]}"; do split -b 15M -d $R/ld-$k.safetensors $O/ld-$k.part; done
# the logs now and again after the checks: an evaluation that fails or runs out of time still leaves the training logs
tar czf $O/results.tgz -C $R --exclude='*.pt' --exclude='*.safetensors' --exclude='tb' .
wait $CHK; cat $R/vaecheck.txt
python3 -m bench.studies.vae_pitch_check ld $R/ld-v*.safetensors > $R/ldcheck.txt 2>&1; cat $R/ldcheck.txt
python3 -m trainer.cli eval $R/ld-v*.safetensors --real $kit --train $kit --out $R/eval --device ${DEV:-cuda} --steps 10 --n 64 > $R/eval.txt 2>&1; cat $R/eval.txt | head -20
tar czf $O/results.tgz -C $R --exclude='*.pt' --exclude='*.safetensors' --exclude='tb' .
ls -la $O
