"""Text for replayed traces: a Mooncake `hash_id` as a fixed block of real tokens, and filler prompts of a set length.

Every word below is three letters after a space (" abc"): one token of SmolLM2's tokenizer, and exactly one of the
simulator's 4-byte placeholder ids (`engine.worker.sim.sim_prompt_ids`), with no two words alike on either. So a prompt
of N such words is N tokens on both backends, and a block of words is a block of tokens.

A prompt's first block also holds the chat template: SmolLM2's comes to 24 tokens before the user's text, the
simulator's to 30. The first block's text opens with eight digits, which SmolLM2 reads as 8 tokens and the
simulator as 2, so that 24 + 8 = 30 + 2 = 32 tokens of the first block are template and digits on both, and the
rest of it (block_size - 32 words) and every later block are words: block k of the trace is tokens
[k * B, (k + 1) * B) of the prompt on both backends. Hence blocks of at least 32 tokens. (Another model's
template shifts the blocks; the prefix cache then still sees equal ids as equal text, one block later.)

Equal ids give equal text (a seeded draw per id); unequal ids give different text: the first block's digits
and every later block's first three words spell the id. The words were picked once from SmolLM2's vocabulary
(`Ġ[a-z]{3}` tokens with distinct simulator ids); tests/engine/workload/test_trace*.py check both tokenizers.
This module knows text and token counts, not traces or workloads (engine/workload/trace.py).
"""
import random

WORDS = tuple("""
    abc abd abs acc ace act add adj adm ads adv aer aff aft age agg ago aid ail aim air aka alb ale alf alg ali
    alk all alt amb amp anc and ang ank ann ans ant anx any ape aph api app apr apt aqu ara arc are arg ark arm
    arr art asc ash ask asp ast ate ath att aud aug aur aut aux avg awa awe axe axi bab bad bag bak bal ban bar
    bas bat bay bec bed bee beg beh bel ben ber bes bet bic bid bif big bil bin bio bip bir bis bit ble blo blu
    bob bod bog bol bom bon boo bor bos bot bou bow box boy bpy bra bre bri bro bru bub bud buf bug bul bun bur
    bus buy cab cad caf cal cam can cap car cas cat cav cel cer cet cfg cha che chi cho cic cig cin cir cis cit
    civ cle clf cli clo cls cmd cms cnt cob coc cod cog coh col com con cop cor cos cot cou cov cow coy cpu cra
    cre cro cru cry csv ctx cub cuc cue cul cup cur cut cyl cyn cyt dab dad dag dan dar das dat day deb dec ded
    def deg del dem den dep der des det dev dew dex dia did dig dil dim din dip dir dis div doc dod dog doi dol
    dom don dop dos dot dou dow dpi dra dre dri dro dru dry dst dub due dug duo dur dut dye dyn dys ear eas eat
    ech eco ect eel eff egg ego ele elk ell elm emb emp enc eng enj enl ens ent eps equ era erg err eru ery esc
    ess est etc eth eug eut eve exc exh exp ext eye fab fac fal fam fan far fat fax fel fem fen fer fet few fib
    fif fig fin fir fit fix fle flo flu fly fmt foc foe fog fox fra fre fri fro fru fry fug ful fum fun fur fus
    fut gad gal gar gau gaz gel gem gen ger get gib gif gig gin gir git gle gli glo gly gob gon gra gre gri gro
    gru gul gun gut guy gym hab hal ham har has hat haw hay haz hel hen her hex hey hig hit hob hoc hog hol hon
    hoo how hrs hue hug huh hum hun hur hus hut hyd hym ibn ich icy ide idi ids idx ign iii ill imb img imp inc
    inf inj ink int inv iod ion iso iss ist its ivy jar jaw jer joy jug jur kay ker ket key kit kne lab lac lad
    lax lay laz lbs led les let lex lib lic lie lik lin lit liv lob los lou low lst luc lum lur lux lyn lys mac
    mad mag mah maj map mar mas mat max may med meg mel mem men mer mes met mig mil mim min mir mis mit mix mla
    mob mod mol mom mon mor mos mot mov mph muc mud mul mur mus mut myc mys nam nas nav neb new nex nib nit nob
    nom nos not now nut obj obl obs occ oct odd off oft old ole omn onc one ont opp ops opt orb ord ore org orn
    ost our out ove owe owl own pac par pay pdb pdf peb pet phe phi phr phy pil pip pir pit piv pix pkg pla ple
    plt ply pom pos pow pox ppm pra pre pri pro psi psy pts pup pur put pyl pym pys que ran rat rav raw ray raz
    rem rep res rev rew rgb rho rhy rim rip ris riv rod rou row run rut rye sam san sar sat sau sav saw sax say
    sch sci scr sea seb seg sem sep seq ser set sew sha she sho shr shy sid sil sim sip sir sit six ske ski sky
    sle sli slu smo sne sol son sor sou sow soy spa spe sph spl spo spr spy sql squ ssh sta std ste sto str sty
    sub sug sul sum sun sur sus sut swe sym syn sys tal tau tax tet tex tgt the thi thr thy til tmp tor tow tox
    toy tra tre tro tru try tsp tub tun tut twe two txt tyr uid ult umb unc unf unl unp uns unt unw upd upl upp
    ups upt url utf var vel vex vig vir vit viv viz vou vow voy vul wal wax way wel whe why wil win wip wis wit
    won wre www xml xyl yes yet yin yog you zyg
""".split())
HEAD_TOKENS = 32          # the first block's template and digits, on SmolLM2 (24 + 8) and on the simulator (30 + 2)
SIM_TEMPLATE_TOKENS = 30  # engine.worker.sim's chat template stand-in
SUFFIX_TOKENS = 6         # SmolLM2's template after the user's text (<|im_end|>, newline, <|im_start|>assistant, newline):
                          # none on the simulator


def _digit_groups() -> tuple[str, ...]:
    """Four-digit strings whose simulator ids differ (the simulator's id of 4 bytes is their value mod 49151)."""
    seen, groups = set(), []
    for i in range(10_000):
        s = f"{i:04d}"
        sim_id = int.from_bytes(s.encode(), "little") % 49151
        if sim_id not in seen:
            seen.add(sim_id)
            groups.append(s)
    return tuple(groups)


DIGITS = _digit_groups()
MAX_HASH_ID = len(DIGITS) ** 2 - 1


def words(rng: random.Random, n: int) -> str:
    return "".join(" " + rng.choice(WORDS) for _ in range(n))


def id_words(hash_id: int) -> str:
    """Three words that spell `hash_id` (base len(WORDS))."""
    w = len(WORDS)
    return "".join(" " + WORDS[d] for d in (hash_id // (w * w) % w, hash_id // w % w, hash_id % w))


def block_text(hash_id: int, index: int, block_size: int, seed: int = 0) -> str:
    """Block `index` of a prompt, for trace block `hash_id`: block_size tokens (the first block: with the template)."""
    assert 0 <= hash_id <= MAX_HASH_ID and block_size >= HEAD_TOKENS
    rng = random.Random(f"{seed}:{hash_id}:{index == 0}")
    if index == 0:
        a, b = divmod(hash_id, len(DIGITS))
        return DIGITS[a] + DIGITS[b] + words(rng, block_size - HEAD_TOKENS)
    return id_words(hash_id) + words(rng, block_size - 3)


def blocks_prompt(hash_ids: list[int], num_tokens: int, block_size: int, seed: int = 0) -> str:
    """A prompt of `num_tokens` tokens (template included; >= HEAD_TOKENS) made of the blocks of `hash_ids`, the last
    one cut short. Each block's text depends on its id and on whether it is first: the same id at another depth
    is the same text, as a trace's id is the same content."""
    assert num_tokens >= HEAD_TOKENS and len(hash_ids) * block_size >= num_tokens
    text = "".join(block_text(h, i, block_size, seed) for i, h in enumerate(hash_ids))
    cut = len(DIGITS[0]) * 2 + 4 * (num_tokens - HEAD_TOKENS)  # 8 digits, then 4 bytes a word
    return text[:cut]


def filler_prompt(num_tokens: int, rng: random.Random) -> str:
    """A prompt of `num_tokens` tokens (template included, so at least the template's 30 and one word)."""
    return words(rng, max(1, num_tokens - SIM_TEMPLATE_TOKENS))
